// Package cnitest gives tests a CNI network of their own: a bridge +
// host-local config with a bridge and a subnet no other test uses, and the
// plugins of Debian's containernetworking-plugins.
package cnitest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// PluginDir is where Debian's containernetworking-plugins puts the plugins.
const PluginDir = "/usr/lib/cni"

// NetworkName is the name of the network Network writes.
const NetworkName = "jetlet-test"

// Require skips the test unless it runs as root with the bridge, host-local
// and loopback plugins installed.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces and CNI plugins need root")
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(PluginDir, p)); err != nil {
			t.Skipf("CNI plugin %s not in %s (apt-get install containernetworking-plugins)", p, PluginDir)
		}
	}
}

// Net is a test's CNI network.
type Net struct {
	// ConfDir holds the network's conflist.
	ConfDir string
	// Prefix is the subnet's first three octets with the dot: "10.88.123.".
	Prefix string
	// Store is host-local's data dir: a file per reserved address under
	// Store/NetworkName.
	Store string
}

// Network writes a bridge + host-local conflist with a bridge and a /24 of
// its own (10.88.100.0/24 and up), the bridge the pods' gateway. Tests of
// several processes at once never share one: each holds a lock on its
// number's file under the temp dir until it ends. The bridge is removed at
// cleanup.
func Network(t testing.TB) Net {
	t.Helper()
	slot := lockSlot(t)
	bridge := fmt.Sprintf("jltest%d", slot)
	n := Net{ConfDir: t.TempDir(), Prefix: fmt.Sprintf("10.88.%d.", 100+slot), Store: t.TempDir()}
	conf := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": true,
    "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "%s0/24"}]]}
  }]
}`, NetworkName, bridge, n.Store, n.Prefix)
	if err := os.WriteFile(filepath.Join(n.ConfDir, "10-test.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", bridge).Run() })
	return n
}

// slots is how many networks tests may hold at once on a host.
const slots = 150

// lockSlot takes the first free slot's lock, held until the test ends.
func lockSlot(t testing.TB) int {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "jetlet-cnitest")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for slot := range slots {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%d.lock", slot)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close()
			continue
		}
		t.Cleanup(func() { f.Close() }) // after the bridge's removal: cleanups run last first
		return slot
	}
	t.Fatalf("all %d CNI test networks are taken", slots)
	return 0
}

// Reserved reports whether host-local holds ip.
func (n Net) Reserved(ip string) bool {
	_, err := os.Stat(filepath.Join(n.Store, NetworkName, ip))
	return err == nil
}

// Bridge gives a node-local pod network (the embedded runtime's default) a
// bridge and a /24 of its own, as Network does: jetlet's --pod-bridge and
// --pod-cidr, or the runtime's PodBridge and PodCIDR. At cleanup the bridge
// and the iptables rules that name it go.
func Bridge(t testing.TB) (bridge, cidr string) {
	t.Helper()
	slot := lockSlot(t)
	bridge = fmt.Sprintf("jltest%d", slot)
	// The slot is ours: a bridge of its name is a killed test's, whose
	// address may not be the one this test's network gives it (a
	// thousand-pod bench failed every sandbox on it).
	_ = exec.Command("ip", "link", "del", bridge).Run()
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", bridge).Run()
		for _, tc := range [][2]string{{"filter", "INPUT"}, {"nat", "POSTROUTING"}} {
			out, _ := exec.Command("iptables", "-w", "-t", tc[0], "-S", tc[1]).Output()
			for _, rule := range strings.Split(string(out), "\n") {
				if strings.HasPrefix(rule, "-A ") && (strings.Contains(rule, " -i "+bridge+" ") || strings.Contains(rule, " -o "+bridge+" ")) {
					// -S quotes the rule as a shell would read it.
					_ = exec.Command("sh", "-c", "iptables -w -t "+tc[0]+" -D"+strings.TrimPrefix(rule, "-A")).Run()
				}
			}
		}
	})
	return bridge, fmt.Sprintf("10.88.%d.0/24", 100+slot)
}
