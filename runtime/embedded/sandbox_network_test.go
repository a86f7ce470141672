package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/network"
	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/gobuild"
)

func cniHarness(t testing.TB) (*harness, cnitest.Net) {
	t.Helper()
	cnitest.Require(t)
	n := cnitest.Network(t)
	h := newHarnessWith(t, func(c *Config) {
		c.CNIConfDir = n.ConfDir
		c.CNIBinDirs = []string{cnitest.PluginDir}
	})
	return h, n
}

// sandboxInfo is the verbose PodSandboxStatus: the status and the netns path.
func (h *harness) sandboxInfo(id string) (*runtimeapi.PodSandboxStatus, string) {
	h.t.Helper()
	resp, err := h.rs.PodSandboxStatus(ctxT(h.t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		h.t.Fatal(err)
	}
	var info struct {
		NetNS string `json:"netns"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil {
		h.t.Fatal(err)
	}
	return resp.GetStatus(), info.NetNS
}

func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

func TestSandboxNetworkThroughCNI(t *testing.T) {
	h, n := cniHarness(t)
	ctx := ctxT(t)

	sb, sbCfg := h.pod("net", nil)
	st, netns := h.sandboxInfo(sb)
	ip := st.GetNetwork().GetIp()
	if !strings.HasPrefix(ip, n.Prefix) || len(st.GetNetwork().GetAdditionalIps()) != 0 {
		t.Fatalf("sandbox network %v, want one IP in %s0/24", st.GetNetwork(), n.Prefix)
	}
	if !network.IsNamespace(netns) || !n.Reserved(ip) {
		t.Fatalf("netns %q is a namespace: %v; %s reserved: %v", netns, network.IsNamespace(netns), ip, n.Reserved(ip))
	}

	// Containers and exec run in the pod's namespace.
	c := h.run(sb, sbCfg, "app", "sleep", "1000")
	if got := nsInode(t, fmt.Sprintf("/proc/%d/ns/net", h.pid(c))); got != nsInode(t, netns) {
		t.Fatal("the container does not run in the sandbox's network namespace")
	}
	out, err := h.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: c, Cmd: []string{"cat", "/proc/net/fib_trie"}})
	if err != nil || !strings.Contains(string(out.GetStdout()), ip) {
		t.Fatalf("exec does not see the pod's address %s: %v\n%s", ip, err, out.GetStdout())
	}

	// The record survives a restart of the runtime.
	h.restart()
	if st, again := h.sandboxInfo(sb); st.GetNetwork().GetIp() != ip || again != netns {
		t.Fatalf("after restart: network %v, netns %q; want %s, %s", st.GetNetwork(), again, ip, netns)
	}

	// Stop releases the network, idempotently; the status keeps the IP.
	for range 2 {
		if _, err := h.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(netns); !os.IsNotExist(err) {
		t.Fatalf("netns %s after StopPodSandbox: %v", netns, err)
	}
	if n.Reserved(ip) {
		t.Fatalf("%s still reserved after StopPodSandbox", ip)
	}
	if st, after := h.sandboxInfo(sb); st.GetNetwork().GetIp() != ip || after != "" {
		t.Fatalf("stopped sandbox: network %v, netns %q", st.GetNetwork(), after)
	}
	if _, err := h.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
}

// A namespace lost while no runtime ran (a reboot) makes its sandbox
// NOTREADY; its stop still frees the address.
func TestSandboxWhoseNamespaceIsGoneIsNotReady(t *testing.T) {
	h, n := cniHarness(t)
	sb, _ := h.pod("lost", nil)
	st, netns := h.sandboxInfo(sb)
	h.stop()
	if err := unix.Unmount(netns, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	h.start()
	if st, _ := h.sandboxInfo(sb); st.GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("sandbox state %s after its namespace went, want NOTREADY", st.GetState())
	}
	if _, err := h.rs.StopPodSandbox(ctxT(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	if ip := st.GetNetwork().GetIp(); n.Reserved(ip) {
		t.Fatalf("%s still reserved after StopPodSandbox", ip)
	}
	if _, err := os.Stat(netns); !os.IsNotExist(err) {
		t.Fatalf("netns file %s after StopPodSandbox: %v", netns, err)
	}
}

func TestHostNetworkSandboxHasNoNamespace(t *testing.T) {
	h, _ := cniHarness(t)
	cfg := podConfig("host", nil)
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
	}}
	resp, err := h.rs.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if st, netns := h.sandboxInfo(resp.GetPodSandboxId()); st.GetNetwork().GetIp() != "" || netns != "" {
		t.Fatalf("host-network sandbox: network %v, netns %q", st.GetNetwork(), netns)
	}
}

func TestRunPodSandboxFailsWithThePluginsError(t *testing.T) {
	cnitest.Require(t)
	n := cnitest.Network(t)
	// A config whose plugins exist but whose IPAM cannot allocate.
	bad := `{"cniVersion": "1.0.0", "name": "bad", "plugins": [{"type": "bridge", "bridge": "jltbad0",
  "ipam": {"type": "host-local", "dataDir": "` + n.Store + `", "ranges": [[{"subnet": "10.88.99.0/24", "rangeStart": "10.88.99.20", "rangeEnd": "10.88.99.10"}]]}}]}`
	if err := os.WriteFile(filepath.Join(n.ConfDir, "00-bad.conflist"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", "jltbad0").Run() })
	h := newHarnessWith(t, func(c *Config) {
		c.CNIConfDir = n.ConfDir
		c.CNIBinDirs = []string{cnitest.PluginDir}
	})
	_, err := h.rs.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: podConfig("bad", nil)})
	if err == nil || !strings.Contains(err.Error(), "RangeStart") {
		t.Fatalf("RunPodSandbox: %v, want host-local's complaint about the range", err)
	}
	list, err := h.rs.ListPodSandbox(ctxT(t), &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(list.GetItems()) != 0 {
		t.Fatalf("sandboxes after a failed run: %v, %v", list.GetItems(), err)
	}
	if entries, _ := os.ReadDir(filepath.Join(h.dir, "state", "netns")); len(entries) != 0 {
		t.Fatalf("namespaces left behind: %v", entries)
	}
}

func TestStartRefusesAnUnusableCNIConfig(t *testing.T) {
	cnitest.Require(t)
	for name, conf := range map[string]string{
		"no config":      "",
		"missing plugin": `{"cniVersion": "1.0.0", "name": "x", "plugins": [{"type": "no-such-plugin"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if conf != "" {
				if err := os.WriteFile(filepath.Join(dir, "10-x.conflist"), []byte(conf), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rt, err := New(Config{Dir: t.TempDir(), ShimPath: gobuild.Shim.Path(t), CNIConfDir: dir, CNIBinDirs: []string{cnitest.PluginDir}, Logger: zerolog.Nop()})
			if err != nil {
				t.Fatal(err)
			}
			err = rt.Start(context.Background(), filepath.Join(t.TempDir(), "cri.sock"))
			if err == nil {
				rt.Stop()
				t.Fatal("Start accepted it")
			}
			t.Log(err)
		})
	}
}

// networkReady is the runtime's NetworkReady condition.
func (h *harness) networkReady() *runtimeapi.RuntimeCondition {
	h.t.Helper()
	resp, err := h.rs.Status(ctxT(h.t), &runtimeapi.StatusRequest{})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, c := range resp.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.NetworkReady {
			return c
		}
	}
	h.t.Fatal("no NetworkReady condition")
	return nil
}

// Without a CNI config dir the runtime, as root, puts a pod on the bridge
// network it writes itself: an address in PodCIDR, the bridge its gateway,
// a config under its dir, and the rule that keeps the bridge off the host's
// loopback.
func TestDefaultNetworkIsTheNodeLocalBridge(t *testing.T) {
	cnitest.Require(t)
	h := newHarness(t)
	if c := h.networkReady(); !c.GetStatus() {
		t.Fatalf("NetworkReady %v", c)
	}
	sb, sbCfg := h.pod("net", nil)
	st, netns := h.sandboxInfo(sb)
	prefix := strings.TrimSuffix(h.cidr, "0/24")
	if ip := st.GetNetwork().GetIp(); !strings.HasPrefix(ip, prefix) || !network.IsNamespace(netns) {
		t.Fatalf("sandbox network %v, netns %q: want an IP in %s and a namespace", st.GetNetwork(), netns, h.cidr)
	}
	c := h.run(sb, sbCfg, "app", "sleep", "1000")
	out, err := h.rs.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: c, Cmd: []string{"cat", "/proc/net/route"}})
	// The default route goes through the bridge's address, the subnet's
	// first (/proc/net/route writes it in hex, least significant byte first).
	gw := net.ParseIP(prefix + "1").To4()
	want := fmt.Sprintf("eth0\t00000000\t%02X%02X%02X%02X", gw[3], gw[2], gw[1], gw[0])
	if err != nil || !strings.Contains(string(out.GetStdout()), want) {
		t.Fatalf("pod routes, want %q: %v\n%s", want, err, out.GetStdout())
	}
	if _, err := os.Stat(filepath.Join(h.dir, "state", "cni", "net.d", network.BridgeConfFile)); err != nil {
		t.Fatal(err)
	}
	rule := append([]string{"-w", "-C", "INPUT"}, network.Bridge{Name: h.bridge}.LoopbackGuard()...)
	if out, err := exec.Command("iptables", rule...).CombinedOutput(); err != nil {
		t.Fatalf("the loopback guard of %s is not in INPUT: %v %s", h.bridge, err, out)
	}
	nat, _ := exec.Command("iptables", "-w", "-t", "nat", "-S", "POSTROUTING").Output()
	if want := "-A POSTROUTING -s " + h.cidr + " ! -o " + h.bridge; !strings.Contains(string(nat), want) || !strings.Contains(string(nat), "MASQUERADE") {
		t.Fatalf("no masquerade of the pods' egress (%s ... MASQUERADE):\n%s", want, nat)
	}
}

// With no plugin usable, a pod still gets a namespace of its own, with only
// lo (up) and no address, and NetworkReady is false with the reason.
func TestWithoutPluginsAPodHasOnlyLoopback(t *testing.T) {
	cnitest.Require(t)
	empty := t.TempDir()
	h := newHarnessWith(t, func(c *Config) { c.CNIBinDirs = []string{empty} })
	if c := h.networkReady(); c.GetStatus() || c.GetReason() != "NetworkPluginNotReady" || !strings.Contains(c.GetMessage(), "only lo") {
		t.Fatalf("NetworkReady %v, want false with the reason", c)
	}
	sb, sbCfg := h.pod("lo", nil)
	st, netns := h.sandboxInfo(sb)
	if st.GetNetwork().GetIp() != "" || !network.IsNamespace(netns) {
		t.Fatalf("sandbox network %v, netns %q: want no IP and a namespace", st.GetNetwork(), netns)
	}
	c := h.run(sb, sbCfg, "app", "sleep", "1000")
	if got := nsInode(t, fmt.Sprintf("/proc/%d/ns/net", h.pid(c))); got != nsInode(t, netns) || got == nsInode(t, "/proc/self/ns/net") {
		t.Fatal("the container is not in the sandbox's own network namespace")
	}
	out, err := h.rs.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: c, Cmd: []string{"cat", "/proc/net/dev"}})
	if err != nil {
		t.Fatal(err)
	}
	var links []string
	for _, l := range strings.Split(string(out.GetStdout()), "\n")[2:] {
		if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
			links = append(links, name)
		}
	}
	if len(links) != 1 || links[0] != "lo" {
		t.Fatalf("pod's links %v, want only lo", links)
	}
	// lo is up: the pod reaches itself on 127.0.0.1.
	port := h.runEchoServer(sb, sbCfg)
	conn, err := network.DialLoopback(netns, port)
	if err != nil {
		t.Fatalf("dial the pod's own loopback: %v", err)
	}
	conn.Close()
}

// portmap turns on route_localnet on the bridge, so that a hostPort answers
// on 127.0.0.1; a pod that routes 127.0.0.1 to its gateway (what root with
// CAP_NET_ADMIN in its own namespace may do) would then reach what listens
// on the host's loopback (CVE-2020-8558), but for the rule the runtime adds.
// A datagram is what gets through without it (a TCP handshake does not
// complete, but its SYN is delivered).
func TestAPodCannotReachTheHostsLoopbackThroughTheBridge(t *testing.T) {
	cnitest.Require(t)
	h := newHarness(t)
	cfg := podConfig("hp", nil)
	cfg.PortMappings = []*runtimeapi.PortMapping{{HostPort: 18080, ContainerPort: 80}}
	resp, err := h.rs.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	_, netns := h.sandboxInfo(resp.GetPodSandboxId())
	if got, _ := os.ReadFile("/proc/sys/net/ipv4/conf/" + h.bridge + "/route_localnet"); strings.TrimSpace(string(got)) != "1" {
		t.Fatalf("portmap left route_localnet %q on the bridge, where the guard was made for 1", got)
	}
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	inPod := func(script string) {
		t.Helper()
		if out, err := exec.Command("nsenter", "--net="+netns, "bash", "-c", script).CombinedOutput(); err != nil {
			t.Fatalf("in the pod: %s: %v %s", script, err, out)
		}
	}
	gw := strings.TrimSuffix(h.cidr, "0/24") + "1"
	inPod("sysctl -qw net.ipv4.conf.eth0.route_localnet=1 && ip route del local 127.0.0.1 table local && " +
		"ip route del local 127.0.0.0/8 table local && ip route add 127.0.0.1/32 via " + gw + " dev eth0")
	send := func(what string) {
		inPod(fmt.Sprintf("echo %s > /dev/udp/127.0.0.1/%d", what, conn.LocalAddr().(*net.UDPAddr).Port))
	}
	send("guarded")
	// The same without the rule gets through: the path it closes is real,
	// and the first datagram the host reads says whether the guarded one did.
	rule := append([]string{"-w", "-D", "INPUT"}, network.Bridge{Name: h.bridge}.LoopbackGuard()...)
	if out, err := exec.Command("iptables", rule...).CombinedOutput(); err != nil {
		t.Fatalf("remove the guard: %v %s", err, out)
	}
	send("unguarded")
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 64)
	n, _, err := conn.ReadFrom(buf)
	if err != nil {
		t.Fatalf("without the guard the pod's datagram does not reach the host's loopback either (the test proves nothing): %v", err)
	}
	if got := strings.TrimSpace(string(buf[:n])); got != "unguarded" {
		t.Fatalf("the host's 127.0.0.1 got %q from the pod through the bridge with the guard in place", got)
	}
}
