package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// netPodJSON is an apply intent for a one-container pod.
func netPodJSON(t *testing.T, uid string, hostNetwork bool, policy corev1.RestartPolicy, c corev1.Container) string {
	t.Helper()
	grace := int64(2)
	c.Image, c.ImagePullPolicy = "busybox:1.36", corev1.PullIfNotPresent
	body, err := json.Marshal(schemas.PodIntent{APIVersion: schemas.APIVersion, Kind: schemas.KindPodIntent, Revision: 1,
		Pod: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)},
			Spec: corev1.PodSpec{RestartPolicy: policy, HostNetwork: hostNetwork, TerminationGracePeriodSeconds: &grace,
				Containers: []corev1.Container{c}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func sandboxIPs(st *schemas.PodStatus) []string {
	if st.Sandbox == nil {
		return nil
	}
	return st.Sandbox.IPs
}

// With --cni-conf-dir, two pods get their own addresses on the CNI network
// and one reaches the other's server; a hostNetwork pod stays on the host's
// network with the node's address.
func TestCNIPodsGetTheirOwnIPsAndReachEachOther(t *testing.T) {
	cnitest.Require(t)
	cn := cnitest.Network(t)
	n := startNode(t, shortDir(t), "", append(mountsTheHost, "--cni-conf-dir", cn.ConfDir, "--cni-bin-dir", cnitest.PluginDir)...)
	server := probeServer.Path(t)

	// The server's readiness probe goes from jetlet, on the host, to the
	// pod's address through the bridge.
	n.publish("srv", sharing(t, netPodJSON(t, "srv", false, corev1.RestartPolicyAlways, corev1.Container{
		Name: "app", Command: []string{server, "-http", ":8080", "-ready-file", "/"},
		ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)},
		}},
	}), filepath.Dir(server)))
	srv := n.waitStatus("srv", 90*time.Second, func(st *schemas.PodStatus) bool {
		return condition(st, schemas.PodReady).Status == schemas.ConditionTrue && len(sandboxIPs(st)) > 0
	})
	srvIP := sandboxIPs(srv)[0]
	if !strings.HasPrefix(srvIP, cn.Prefix) {
		t.Fatalf("server pod IPs %v, want one in %s0/24", sandboxIPs(srv), cn.Prefix)
	}

	// The client, in a namespace of its own, fetches from the server.
	n.publish("cli", sharing(t, netPodJSON(t, "cli", false, corev1.RestartPolicyNever, corev1.Container{
		Name: "app", Command: []string{server, "-get", "http://" + net.JoinHostPort(srvIP, "8080") + "/ready"},
	}), filepath.Dir(server)))
	cli := n.waitStatus("cli", 90*time.Second, func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseSucceeded || st.Phase == schemas.PhaseFailed
	})
	if cli.Phase != schemas.PhaseSucceeded {
		t.Fatalf("the client pod could not reach %s:8080: %+v", srvIP, cli)
	}
	if ips := sandboxIPs(cli); len(ips) != 1 || ips[0] == srvIP || !strings.HasPrefix(ips[0], cn.Prefix) {
		t.Fatalf("client pod IPs %v, want one in %s0/24 other than the server's %s", ips, cn.Prefix, srvIP)
	}

	// A hostNetwork pod is on the host, with the node's address.
	n.publish("host", netPodJSON(t, "host", true, corev1.RestartPolicyAlways, corev1.Container{
		Name: "app", Command: []string{"/bin/sh", "-c", "exec sleep 600"},
	}))
	host := n.waitStatus("host", 90*time.Second, func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseRunning && len(sandboxIPs(st)) > 0
	})
	if ips := sandboxIPs(host); len(ips) != 1 || !slices.Contains(hostAddrs(t), ips[0]) {
		t.Fatalf("hostNetwork pod IPs %v, want one of the host's non-loopback addresses %v", ips, hostAddrs(t))
	}
}

// hostAddrs are the host's non-loopback addresses.
func hostAddrs(t *testing.T) []string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}

// A CNI config dir jetlet cannot use stops `jetlet run` at start, saying why.
func TestJetletRunRefusesAnUnusableCNIConfDir(t *testing.T) {
	cnitest.Require(t)
	empty := t.TempDir()
	p := jetlettest.Start(t, "run", "--node", "n1", "--data-dir", shortDir(t), "--nats-listen", "127.0.0.1:0",
		"--http-listen", "127.0.0.1:0", "--cni-conf-dir", empty)
	if code := p.Wait(60 * time.Second); code == 0 {
		t.Fatal("jetlet run exited 0")
	}
	if want := "no network config in CNI config dir " + empty; !strings.Contains(p.Logs(), want) {
		t.Fatalf("jetlet run's output does not say %q:\n%s", want, p.Logs())
	}
}

var netProbe = &gobuild.Command{Pkg: "github.com/jetlet/jetlet/test/e2e/netprobe", Name: "netprobe", Static: true}

// netReport is what netprobe prints.
type netReport struct {
	NetNS         string            `json:"netns"`
	Links         []string          `json:"links"`
	Dials         map[string]string `json:"dials"`
	SawHostMarker bool              `json:"sawHostMarker"`
	SawOwnMarker  bool              `json:"sawOwnMarker"`
	CaptureError  string            `json:"captureError"`
}

// runNetProbe runs netprobe with args in a pod (uid) to its end and
// returns its report; during, if set, runs once the capture is on, before
// the capture stops.
func runNetProbe(t *testing.T, n *node, uid string, during func(), args ...string) netReport {
	t.Helper()
	bin, dir := netProbe.Path(t), shortDir(t)
	out := filepath.Join(dir, "report.json")
	if during != nil {
		args = append(args, "-ready", filepath.Join(dir, "ready"), "-stop", filepath.Join(dir, "stop"))
	}
	n.publish(uid, sharing(t, netPodJSON(t, uid, false, corev1.RestartPolicyNever, corev1.Container{
		Name: "app", Command: append([]string{bin, "-out", out}, args...),
	}), dir, filepath.Dir(bin)))
	if during != nil {
		poll.Until(t, 90*time.Second, func() string { return "netprobe's capture to run" }, func() bool {
			_, err := os.Stat(filepath.Join(dir, "ready"))
			return err == nil
		})
		during()
		if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st := n.waitStatus(uid, 90*time.Second, func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseSucceeded || st.Phase == schemas.PhaseFailed
	})
	var r netReport
	data, err := os.ReadFile(out)
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	if st.Phase != schemas.PhaseSucceeded || err != nil {
		t.Fatalf("netprobe: %v, %s\n%+v\n%s", err, data, st, n.containerLog(t, uid))
	}
	return r
}

// acceptAll serves a listener that takes every connection and drops it.
func acceptAll(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return l
}

// egressTarget is a TCP listener on an address of the host that is on no
// pod network: one end of a veth pair of its own, which a pod reaches
// through its default route, the bridge (the machine has no other network
// to go out to).
func egressTarget(t *testing.T) string {
	t.Helper()
	link := fmt.Sprintf("jlteg%d", os.Getpid()%100000)
	addr := fmt.Sprintf("198.18.%d.1", os.Getpid()%250)
	for _, args := range [][]string{{"link", "add", link, "type", "veth", "peer", "name", link + "p"},
		{"addr", "add", addr + "/32", "dev", link}, {"link", "set", link + "p", "up"}, {"link", "set", link, "up"}} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			_ = exec.Command("ip", "link", "del", link).Run()
			t.Fatalf("ip %v: %v %s", args, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", link).Run() })
	return acceptAll(t, "tcp", addr+":0").Addr().String()
}

func portOf(t *testing.T, hostPort string) string {
	t.Helper()
	if _, rest, ok := strings.Cut(hostPort, "://"); ok {
		hostPort = rest
	}
	_, port, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// Without --cni-conf-dir a pod has a network of its own: its namespace, an
// address on the node's bridge it reaches other pods and the host's other
// addresses from, a hostPort the host reaches; and it reaches none of what
// listens on the host's loopback (jetlet's NATS, HTTP, image registry and
// CRI streaming servers, a test's listener), no abstract unix socket of the
// host, and sees none of the host's loopback traffic.
func TestPodsHaveANetworkOfTheirOwnByDefault(t *testing.T) {
	cnitest.Require(t)
	registry := "127.0.0.1:" + strconv.Itoa(freePort(t))
	n := startNode(t, shortDir(t), "", append(mountsTheHost, "--image-registry-listen", registry)...)
	server := probeServer.Path(t)

	hostPort := freePort(t)
	n.publish("srv", sharing(t, netPodJSON(t, "srv", false, corev1.RestartPolicyAlways, corev1.Container{
		Name: "app", Command: []string{server, "-http", ":8080", "-ready-file", "/"},
		Ports: []corev1.ContainerPort{{ContainerPort: 8080, HostPort: int32(hostPort)}},
		ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(8080)},
		}},
	}), filepath.Dir(server)))
	srv := n.waitStatus("srv", 90*time.Second, func(st *schemas.PodStatus) bool {
		return condition(st, schemas.PodReady).Status == schemas.ConditionTrue && len(sandboxIPs(st)) > 0
	})
	srvIP := net.ParseIP(sandboxIPs(srv)[0]).To4()
	if srvIP == nil {
		t.Fatalf("server pod IPs %v, want an IPv4 address", sandboxIPs(srv))
	}
	gateway := net.IPv4(srvIP[0], srvIP[1], srvIP[2], 1).String() // the bridge: the /24's first

	// The hostPort answers on the host's loopback, through portmap.
	var got int
	poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("GET /ready on hostPort %d: %d", hostPort, got) }, func() bool {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(hostPort) + "/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		got = resp.StatusCode
		return got == http.StatusOK
	})

	local := acceptAll(t, "tcp", "127.0.0.1:0").Addr().String()
	abstract := "@jetlet-test-" + strconv.Itoa(os.Getpid())
	acceptAll(t, "unix", abstract)
	nats, web := portOf(t, n.proc.NATSURL()), portOf(t, n.proc.HTTPAddr())
	stream := portOf(t, n.proc.WaitLog("embedded process runtime serving", 30*time.Second)["streaming"].(string))
	reached := []string{net.JoinHostPort(srvIP.String(), "8080"), egressTarget(t)}
	refused := []string{local, net.JoinHostPort(gateway, portOf(t, local)), "127.0.0.1:" + nats, abstract}
	for _, port := range []string{nats, web, portOf(t, registry), stream} {
		refused = append(refused, net.JoinHostPort(gateway, port))
	}

	// What the host says on its loopback (a client of jetlet's NATS, say)
	// while the pod captures on its own.
	marker := "secret-" + strconv.Itoa(os.Getpid())
	talk := func() {
		for range 5 {
			c, err := net.Dial("udp", "127.0.0.1:9")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = c.Write([]byte(marker))
			c.Close()
		}
		c, err := net.Dial("tcp", local)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte(marker))
		c.Close()
	}
	r := runNetProbe(t, n, "cli", talk, "-dial", strings.Join(append(reached, refused...), ","), "-retry", reached[0], "-capture-lo", marker)

	hostNS, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if r.NetNS == "" || r.NetNS == hostNS {
		t.Errorf("the pod's network namespace is %q, the host's %q", r.NetNS, hostNS)
	}
	for _, a := range reached {
		if r.Dials[a] != "" {
			t.Errorf("the pod does not reach %s: %s", a, r.Dials[a])
		}
	}
	for _, a := range refused {
		if e, ok := r.Dials[a]; !ok || e == "" {
			t.Errorf("the pod reaches %s (tried: %v)", a, ok)
		}
	}
	if r.CaptureError != "" || !r.SawOwnMarker {
		t.Errorf("the pod's capture on its lo did not work: %q, saw its own packet: %v", r.CaptureError, r.SawOwnMarker)
	}
	if r.SawHostMarker {
		t.Error("the pod's capture on lo saw the host's loopback traffic")
	}
	rec := n.waitRecord(t, 30*time.Second, func(rec schemas.NodeRecord) bool {
		return slices.ContainsFunc(rec.Conditions, func(c schemas.NodeCondition) bool { return c.Type == corev1.NodeNetworkUnavailable })
	})
	if hasCondition(rec, corev1.NodeNetworkUnavailable) {
		t.Errorf("the node reports NetworkUnavailable with its pod network up: %+v", rec.Conditions)
	}
}

// With no CNI plugin to run, a pod still gets a network namespace of its
// own, with only lo; the node's record and jetlet's log say why.
func TestWithoutPluginsAPodHasOnlyLoopback(t *testing.T) {
	cnitest.Require(t)
	n := startNode(t, shortDir(t), "", append(mountsTheHost, "--cni-bin-dir", t.TempDir())...)
	n.proc.WaitLog("pods get a network namespace with only lo: the node-local pod network is not usable", 30*time.Second)

	local := acceptAll(t, "tcp", "127.0.0.1:0").Addr().String()
	r := runNetProbe(t, n, "lo", nil, "-dial", local)
	hostNS, _ := os.Readlink("/proc/self/ns/net")
	if r.NetNS == hostNS || !slices.Equal(r.Links, []string{"lo"}) || r.Dials[local] == "" {
		t.Fatalf("pod's network: %+v; want a namespace other than the host's %s with only lo, not reaching %s", r, hostNS, local)
	}
	if st, _ := n.status("lo"); len(sandboxIPs(st)) != 0 {
		t.Errorf("pod IPs %v, want none", sandboxIPs(st))
	}

	// A running pod keeps its sandbox through later syncs: one without an IP
	// is what the runtime gives while its network is down, not one to make
	// again (kubelet's rule for a failed network plugin).
	n.publish("sleeper", podJSON("sleeper", 1, "Always", "exec sleep 600"))
	first := n.waitStatus("sleeper", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	n.publish("sleeper", podJSON("sleeper", 2, "Always", "exec sleep 600"))
	n.results("sleeper", 2)
	if again, _ := n.status("sleeper"); again.Sandbox == nil || first.Sandbox == nil || again.Sandbox.ID != first.Sandbox.ID ||
		again.Containers[0].ContainerID != first.Containers[0].ContainerID {
		t.Errorf("the pod without IP got a new sandbox or container on its next sync: %+v, then %+v", first, again)
	}

	rec := n.waitRecord(t, 30*time.Second, func(rec schemas.NodeRecord) bool { return hasCondition(rec, corev1.NodeNetworkUnavailable) })
	for _, c := range rec.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable && (c.Reason != "NetworkPluginNotReady" || !strings.Contains(c.Message, `failed to find plugin "bridge"`)) {
			t.Errorf("NetworkUnavailable %+v, want the reason and the missing plugin", c)
		}
	}
}
