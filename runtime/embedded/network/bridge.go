package network

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BridgeConfFile is the name of the conflist WriteBridge writes.
const BridgeConfFile = "10-jetlet.conflist"

// Bridge is the node-local network pods join when no CNI config is given:
// the standard bridge plugin with the bridge as the pods' gateway,
// host-local addresses, portmap for hostPort, as containerd's default
// 10-containerd-net.conflist; their egress is masqueraded by one rule for
// the subnet (Firewall) rather than by the plugin's chain per pod, which
// doubles the cost of a pod's start and stop.
type Bridge struct {
	// Name is the bridge's interface name.
	Name string
	// Subnet is the pods' IPv4 subnet; the bridge takes its first address.
	Subnet string
	// ConfDir receives the conflist; IPAMDir is host-local's store.
	ConfDir, IPAMDir string
}

// Validate reports a bridge name the kernel refuses or a subnet that is no
// IPv4 network with room for a gateway and pods.
func (b Bridge) Validate() error {
	if b.Name == "" || len(b.Name) > 15 || strings.ContainsAny(b.Name, "/: \t\n") || b.Name == "." || b.Name == ".." {
		return fmt.Errorf("bridge name %q: want 1 to 15 characters, no '/', ':' or space", b.Name)
	}
	ip, ipn, err := net.ParseCIDR(b.Subnet)
	if err != nil {
		return fmt.Errorf("pod CIDR: %w", err)
	}
	if ip.To4() == nil {
		return fmt.Errorf("pod CIDR %s: want an IPv4 network", b.Subnet)
	}
	if !ip.Equal(ipn.IP) {
		return fmt.Errorf("pod CIDR %s: host bits set (the network is %s)", b.Subnet, ipn)
	}
	if ones, _ := ipn.Mask.Size(); ones > 28 {
		return fmt.Errorf("pod CIDR %s: want /28 or larger", b.Subnet)
	}
	return nil
}

// Write writes the bridge's conflist into ConfDir (replacing an older one:
// the flags are the config).
func (b Bridge) Write() error {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "jetlet",
		"plugins": []map[string]any{{
			"type": "bridge", "bridge": b.Name, "isGateway": true, "hairpinMode": true,
			"ipam": map[string]any{
				"type": "host-local", "dataDir": b.IPAMDir,
				"ranges": [][]map[string]string{{{"subnet": b.Subnet}}},
				"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
			},
		}, {
			"type": "portmap", "capabilities": map[string]bool{"portMappings": true},
		}},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(b.ConfDir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(b.ConfDir, "."+BridgeConfFile)
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(b.ConfDir, BridgeConfFile))
}

// firewallRule is an iptables rule: its table and chain, and its spec.
type firewallRule struct {
	table, chain string
	spec         []string
}

// firewall is what the network needs of iptables: the masquerade of what
// pods send out of the subnet, and the rule that drops what comes from the
// bridge for the host's 127.0.0.0/8: portmap turns on route_localnet on the
// bridge so that hostPorts answer on 127.0.0.1, which would otherwise let a
// pod that routes 127.0.0.1 to its gateway reach the host's loopback
// services (CVE-2020-8558; kube-proxy's KUBE-FIREWALL rule is the same).
// Replies of the host's own connections to a hostPort are let through.
func (b Bridge) firewall() []firewallRule {
	return []firewallRule{
		{"nat", "POSTROUTING", []string{"-s", b.Subnet, "!", "-o", b.Name, "-m", "comment", "--comment", "jetlet: pods egress", "-j", "MASQUERADE"}},
		{"filter", "INPUT", b.LoopbackGuard()},
	}
}

// LoopbackGuard is the spec of firewall's rule of the INPUT chain.
func (b Bridge) LoopbackGuard() []string {
	return []string{"-i", b.Name, "-d", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT",
		"-m", "comment", "--comment", "jetlet: keep pods off the host loopback", "-j", "DROP"}
}

// Firewall inserts the network's iptables rules that are not there yet.
// They stay when jetlet exits, as the plugins' chains do.
func (b Bridge) Firewall(ctx context.Context) error {
	for _, r := range b.firewall() {
		args := append([]string{"-w", "-t", r.table, "-C", r.chain}, r.spec...)
		if exec.CommandContext(ctx, "iptables", args...).Run() == nil {
			continue
		}
		args[3] = "-I"
		out, err := exec.CommandContext(ctx, "iptables", args...).CombinedOutput()
		var notFound *exec.Error
		switch {
		case errors.As(err, &notFound):
			return fmt.Errorf("iptables not found (portmap needs it too): %w", err)
		case err != nil:
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(args[1:], " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
