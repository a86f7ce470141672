package bridge_test

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// waitWeb waits until web's Deployment has rolled out its template to
// replicas Running and Ready pods, all on nodes ok accepts, and none
// other, and returns them.
func (f *fleet) waitWeb(t *testing.T, replicas int, what string, ok func(corev1.Pod) bool) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	poll.Until(t, 3*time.Minute, func() string {
		return fmt.Sprintf("%d pods of web %s: %s\n%s", replicas, what, podStates(pods), f.bridge.Logs())
	}, func() bool {
		d, err := f.cp.Client.AppsV1().Deployments(metav1.NamespaceDefault).Get(t.Context(), "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods = f.pods(t, "app=web")
		rolledOut := d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == int32(replicas) && d.Status.Replicas == int32(replicas) && d.Status.AvailableReplicas == int32(replicas)
		return rolledOut && len(pods) == replicas && !slices.ContainsFunc(pods, func(p corev1.Pod) bool {
			return p.Status.Phase != corev1.PodRunning || !podReady(p) || !ok(p)
		})
	})
	return pods
}

// The node's statuses hold no live pod.
func (f *fleet) noLivePods(t *testing.T, node string) {
	t.Helper()
	poll.Until(t, time.Minute, poll.Msg("node "+node+" without live pods"), func() bool {
		bus, err := f.jetlet.Statuses(t.Context(), node)
		if err != nil {
			t.Fatal(err)
		}
		return !slices.ContainsFunc(bus, func(s schemas.PodStatus) bool { return s.Phase != schemas.PhaseTerminated })
	})
}

// A Deployment on two jetlet nodes through its life: a rolling update
// replaces every pod with the new template; `kubectl drain` of one node
// moves its pods to the other (the node stops them); and once that node is
// back in service, the other's jetlet is killed: its Node goes NotReady
// (Unknown), the control plane evicts its pods, and they run again on the
// node left.
func TestRollingUpdateDrainAndALostNode(t *testing.T) {
	t.Parallel() // most of it waits for a killed node to go Unknown
	f := startFleet(t, "n1", "n2")
	ctx := t.Context()
	for _, name := range []string{"n1", "n2"} {
		f.schedulable(t, name)
	}
	d := deployment("web", 4)
	// Evicted from an unreachable node at once, not after 5 minutes.
	d.Spec.Template.Spec.Tolerations = []corev1.Toleration{
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(1))},
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(1))},
	}
	if _, err := f.cp.Client.AppsV1().Deployments(metav1.NamespaceDefault).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := f.waitWeb(t, 4, "on both nodes", func(corev1.Pod) bool { return true })

	// A rolling update: every pod replaced by one of the new template.
	if _, err := f.cp.Kubectl(ctx, "set", "env", "deployment/web", "VERSION=2"); err != nil {
		t.Fatal(err)
	}
	hasVersion2 := func(p corev1.Pod) bool {
		return slices.Contains(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "VERSION", Value: "2"})
	}
	updated := f.waitWeb(t, 4, "of the new template", hasVersion2)
	for _, p := range updated {
		if slices.ContainsFunc(first, func(old corev1.Pod) bool { return old.UID == p.UID }) {
			t.Errorf("pod %s survived the rolling update", p.Name)
		}
	}
	if out, err := f.cp.Kubectl(ctx, "rollout", "status", "deployment/web", "--timeout=1m"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	// Drain n1: its pods are evicted and placed on n2; n1 stops them.
	if out, err := f.cp.Kubectl(ctx, "drain", "n1", "--ignore-daemonsets", "--timeout=2m"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	f.waitWeb(t, 4, "on n2 after the drain of n1", func(p corev1.Pod) bool { return p.Spec.NodeName == "n2" && hasVersion2(p) })
	f.noLivePods(t, "n1")
	if _, err := f.cp.Kubectl(ctx, "uncordon", "n1"); err != nil {
		t.Fatal(err)
	}

	// n2's jetlet is killed: its Node goes Unknown, its pods are evicted
	// and run again on n1.
	f.nodes["n2"].Signal(syscall.SIGKILL)
	f.nodes["n2"].Wait(time.Minute)
	f.node(t, "n2", "Ready Unknown", func(n *corev1.Node) bool { return readyStatus(n) == corev1.ConditionUnknown })
	f.waitWeb(t, 4, "on n1 after n2 was lost", func(p corev1.Pod) bool { return p.Spec.NodeName == "n1" })
}

// The nodes keep their pods without the bridge: killed, it leaves them
// running (the bus has them Running, the same uids); started again, it
// takes the Nodes over and places and reports pods as before, and deletes
// the Node of a node that stopped meanwhile.
func TestPodsRunOnWhileTheBridgeIsGone(t *testing.T) {
	t.Parallel()
	f := startFleet(t, "n1", "n2")
	ctx := t.Context()
	f.schedulable(t, "n1")
	f.schedulable(t, "n2")
	d := deployment("web", 2)
	d.Spec.Template.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "n1"}
	d.Spec.Template.Spec.TopologySpreadConstraints = nil
	if _, err := f.cp.Client.AppsV1().Deployments(metav1.NamespaceDefault).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := f.waitWeb(t, 2, "on n1", func(corev1.Pod) bool { return true })

	f.bridge.Signal(syscall.SIGKILL)
	f.bridge.Wait(time.Minute)
	// Without a bridge nothing reports to the API server: the bus is where
	// the pods are seen running on.
	bus, err := f.jetlet.Statuses(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range before {
		if !slices.ContainsFunc(bus, func(s schemas.PodStatus) bool { return s.UID == string(p.UID) && s.Phase == schemas.PhaseRunning }) {
			t.Errorf("pod %s is not Running on n1 with the bridge gone", p.Name)
		}
	}

	f.nodes["n2"].Signal(syscall.SIGTERM) // a clean stop: its record is deleted
	f.nodes["n2"].Wait(time.Minute)

	f.bridge = f.startBridge(t)
	poll.Until(t, time.Minute, poll.Msg("Node n2 deleted by the new bridge"), func() bool {
		_, err := f.cp.Client.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	if _, err := f.cp.Kubectl(ctx, "scale", "deployment/web", "--replicas=3"); err != nil {
		t.Fatal(err)
	}
	after := f.waitWeb(t, 3, "on n1 with a new bridge", func(corev1.Pod) bool { return true })
	for _, p := range before {
		i := slices.IndexFunc(after, func(q corev1.Pod) bool { return q.UID == p.UID })
		if i < 0 {
			t.Errorf("pod %s did not outlive the bridge", p.Name)
		} else if n := after[i].Status.ContainerStatuses[0].RestartCount; n != 0 {
			t.Errorf("pod %s restarted %d times across the bridge's restart", p.Name, n)
		}
	}
}
