package reconcile

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
)

// BenchmarkComputePodActions: the plan for a converged 3-container pod.
func BenchmarkComputePodActions(b *testing.B) {
	pod, status := makeBasePodAndStatus()
	b.ReportAllocs()
	for b.Loop() {
		_ = ComputePodActions(pod, status, Probes{Liveness: kubecontainer.NoProbeResults{}, Startup: kubecontainer.NoProbeResults{}})
	}
}

// BenchmarkNoOpSync: GetPodStatus plus SyncPod of a converged 3-container
// pod; reports the CRI calls each makes (cri-calls/op). A dead container is
// still noticed: its listed state differs from the cached one.
func BenchmarkNoOpSync(b *testing.B) {
	ctx := context.Background()
	counting := &countingRuntime{Runtime: fakecri.New()}
	m, _ := newTestManager(b, counting)
	pod := threeContainerPod()
	sync := func() kubecontainer.PodSyncResult {
		st, err := m.GetPodStatus(ctx, string(pod.UID), pod.Name, pod.Namespace)
		if err != nil {
			b.Fatal(err)
		}
		return m.SyncPod(ctx, pod, st)
	}
	if err := sync().Error(); err != nil {
		b.Fatal(err)
	}
	sync() // warm the status cache
	counting.reset()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if r := sync(); len(r.Actions) != 0 {
			b.Fatalf("not a no-op: %+v", r.Actions)
		}
		n++
	}
	b.ReportMetric(float64(counting.total())/float64(n), "cri-calls/op")
}

// TestNoOpSyncNoticesDeath: the cached no-op path still sees a container die.
func TestNoOpSyncNoticesDeath(t *testing.T) {
	ctx := context.Background()
	rt := fakecri.New()
	counting := &countingRuntime{Runtime: rt}
	m, _ := newTestManager(t, counting)
	pod := testPod(corev1.Container{Name: "a", Image: "img:1", Command: []string{"x"}})
	st, _ := m.GetPodStatus(ctx, "uid1", "p", "ns")
	m.SyncPod(ctx, pod, st)
	_, _ = m.GetPodStatus(ctx, "uid1", "p", "ns")
	counting.reset()
	st, _ = m.GetPodStatus(ctx, "uid1", "p", "ns")
	if n := counting.total(); n != 2 {
		t.Errorf("converged GetPodStatus made %d CRI calls, want 2 (%v)", n, counting.calls)
	}
	rt.Exit("a", 7)
	st, _ = m.GetPodStatus(ctx, "uid1", "p", "ns")
	if c := st.FindContainerStatusByName("a"); c.State != kubecontainer.ContainerExited || c.ExitCode != 7 {
		t.Errorf("death not noticed: %+v", c)
	}
}

// BenchmarkPlanPod: the node's plan for a converged 3-container pod whose
// spec changed (one restart), after the status read a sync makes; reports
// the CRI calls the plan adds to that read (cri-calls/op, want 0).
//
//	go test -run '^$' -bench PlanPod ./reconcile
func BenchmarkPlanPod(b *testing.B) {
	counting := &countingRuntime{Runtime: fakecri.New()}
	m, _ := newTestManager(b, counting)
	pod := threeContainerPod()
	st := syncedStatus(b, m, pod)
	changed := pod.DeepCopy()
	changed.Spec.Containers[1].Command = []string{"y"}
	counting.reset()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		plan := m.PlanPod(changed, st, pod)
		if plan.Containers[1].Action != schemas.PlanRestart || !slices.Equal(plan.Containers[1].Fields, []string{"command"}) {
			b.Fatalf("plan %+v: want b restarted for its command", plan)
		}
		n++
	}
	b.ReportMetric(float64(counting.total())/float64(n), "cri-calls/op")
}

// threeContainerPod is a pod of three containers of one image.
func threeContainerPod() *corev1.Pod {
	return testPod(
		corev1.Container{Name: "a", Image: "img:1", Command: []string{"x"}},
		corev1.Container{Name: "b", Image: "img:1", Command: []string{"x"}},
		corev1.Container{Name: "c", Image: "img:1", Command: []string{"x"}},
	)
}

// syncedStatus syncs pod once and returns its status after.
func syncedStatus(tb testing.TB, m *Kuberuntime, pod *corev1.Pod) *kubecontainer.PodStatus {
	tb.Helper()
	ctx := context.Background()
	st, err := m.GetPodStatus(ctx, string(pod.UID), pod.Name, pod.Namespace)
	if err != nil {
		tb.Fatal(err)
	}
	if err := m.SyncPod(ctx, pod, st).Error(); err != nil {
		tb.Fatal(err)
	}
	if st, err = m.GetPodStatus(ctx, string(pod.UID), pod.Name, pod.Namespace); err != nil {
		tb.Fatal(err)
	}
	return st
}
