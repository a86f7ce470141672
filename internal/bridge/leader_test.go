package bridge_test

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/kubetest"
	"github.com/jetlet/jetlet/test/poll"
)

// shortLeaderElection are leader election flags short enough for a test:
// a standby takes over within 4 s of the leader's last renewal, plus a
// retry.
var shortLeaderElection = []string{"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "1s"}

// bridgedNodes is how many nodes a bridge's log says it bridged.
func bridgedNodes(p *jetlettest.Process) int {
	return strings.Count(p.Logs(), `"message":"bridging node"`)
}

// Two bridges of one fleet: one holds the Lease and bridges each node
// once, the other stands by and bridges none. The leader killed, the
// standby takes the Lease once it expires and bridges the nodes: the Nodes
// stay Ready and a pod created then runs. A leader that loses its Lease
// exits non-zero; one stopped releases it.
func TestTwoBridgesOneLeadsTheOtherTakesOver(t *testing.T) {
	f := newFleet(t, kubetest.Start(t), "n1", "n2")
	ctx := t.Context()
	byID := map[string]*jetlettest.Process{}
	for range 2 {
		b := f.startBridge(t, shortLeaderElection...)
		byID[b.WaitLog("electing a leader", time.Minute)["identity"].(string)] = b
	}
	leases := f.cp.Client.CoordinationV1().Leases(metav1.NamespaceSystem)
	holder := func() string {
		l, err := leases.Get(ctx, "jetlet-bridge", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	var leaderID string
	poll.Until(t, time.Minute, func() string { return "Lease kube-system/jetlet-bridge held by a bridge, not " + leaderID }, func() bool {
		leaderID = holder()
		return byID[leaderID] != nil
	})
	leader := byID[leaderID]
	var standby *jetlettest.Process
	for id, b := range byID {
		if id != leaderID {
			standby = b
		}
	}
	f.bridge = leader
	for _, name := range []string{"n1", "n2"} {
		f.schedulable(t, name)
	}
	leader.WaitLog("leading: bridging", time.Minute)
	standby.WaitLog("standing by: another bridge leads", time.Minute)
	if n := bridgedNodes(leader); n != 2 {
		t.Errorf("the leader bridged %d nodes, want 2 (each once)\n%s", n, leader.Logs())
	}
	if n := bridgedNodes(standby); n != 0 {
		t.Errorf("the standby bridged %d nodes, want none\n%s", n, standby.Logs())
	}

	killed := time.Now()
	leader.Signal(syscall.SIGKILL)
	leader.Wait(time.Minute)
	standby.WaitLog("leading: bridging", time.Minute)
	t.Logf("the standby leads %s after the leader was killed (lease 4s, retry 1s)", time.Since(killed).Round(10*time.Millisecond))
	f.bridge = standby
	poll.Until(t, time.Minute, func() string { return "Lease held by the standby, not " + holder() }, func() bool {
		return byID[holder()] == standby
	})
	poll.Until(t, time.Minute, func() string { return "the standby bridges both nodes\n" + standby.Logs() }, func() bool {
		return bridgedNodes(standby) == 2
	})
	// The Nodes advertise the new leader's kubelet API.
	for _, name := range []string{"n1", "n2"} {
		f.node(t, name, "advertising the new leader's kubelet API", func(n *corev1.Node) bool {
			return slices.ContainsFunc(strings.Split(standby.Logs(), "\n"), func(line string) bool {
				return strings.Contains(line, `"message":"serving the kubelet API"`) &&
					strings.Contains(line, fmt.Sprintf(`"address":"127.0.0.1:%d"`, n.Status.DaemonEndpoints.KubeletEndpoint.Port))
			})
		})
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: metav1.NamespaceDefault, Labels: map[string]string{"app": "after"}}, Spec: sleeper()}
	if _, err := f.cp.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	poll.Until(t, 2*time.Minute, func() string { return "pod after Running: " + podStates(pods) + "\n" + standby.Logs() }, func() bool {
		pods = f.pods(t, "app=after")
		return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning
	})
	for _, name := range []string{"n1", "n2"} {
		n, err := f.cp.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if readyStatus(n) != corev1.ConditionTrue {
			t.Errorf("Node %s conditions %+v after the failover, want Ready", name, n.Status.Conditions)
		}
	}
	if standby.Exited() {
		t.Fatalf("the new leader exited\n%s", standby.Logs())
	}

	// The Lease taken from the leader (another holder, renewed): the
	// leader cannot renew and exits non-zero, for its supervisor to start
	// it again; a third bridge takes over once the thief's Lease expires.
	third := f.startBridge(t, shortLeaderElection...)
	byID[third.WaitLog("electing a leader", time.Minute)["identity"].(string)] = third
	third.WaitLog("standing by: another bridge leads", time.Minute)
	l, err := leases.Get(ctx, "jetlet-bridge", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	thief, now := "thief", metav1.NowMicro()
	l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = &thief, &now, &now
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if code := standby.Wait(time.Minute); code != 1 || !strings.Contains(standby.Logs(), "leaderelection lost") {
		t.Errorf("a leader that lost its Lease exited %d, want 1 with leaderelection lost\n%s", code, standby.Logs())
	}
	third.WaitLog("leading: bridging", time.Minute)
	f.bridge = third
	poll.Until(t, time.Minute, func() string { return "the third bridge bridges both nodes\n" + third.Logs() }, func() bool {
		return bridgedNodes(third) == 2
	})

	// Stopped, a leader stops bridging and then releases the Lease: the
	// next bridge need not wait for it to expire.
	third.Signal(syscall.SIGTERM)
	if code := third.Wait(time.Minute); code != 0 {
		t.Errorf("a leader stopped exited %d, want 0\n%s", code, third.Logs())
	}
	if h := holder(); h != "" {
		t.Errorf("Lease held by %q after its leader stopped, want released", h)
	}
}
