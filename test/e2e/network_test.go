package e2e_test

import (
	"encoding/json"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/jetlettest"
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
