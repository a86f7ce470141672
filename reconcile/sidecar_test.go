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

// startSidecarPod syncs a pod of two sidecars (side1, side2) and an app
// container over rt until all three run.
func startSidecarPod(t *testing.T, rt Runtime) (*Kuberuntime, *eventLog, *corev1.Pod) {
	t.Helper()
	m, events := newTestManager(t, rt)
	always := corev1.ContainerRestartPolicyAlways
	pod := testPod(corev1.Container{Name: "app", Image: "img:1"})
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "side1", Image: "img:1", RestartPolicy: &always},
		{Name: "side2", Image: "img:1", RestartPolicy: &always},
	}
	for range 3 { // side1, side2, app: one per sync
		if err := syncOnce(t, m, pod).Error(); err != nil {
			t.Fatal(err)
		}
	}
	return m, events, pod
}

// A sidecar pod starts its sidecars in order, then the app container; a
// kill stops the app container first, then the sidecars last first.
func TestSidecarsStartFirstAndStopLast(t *testing.T) {
	rt := &stopRecorder{Runtime: fakecri.New()}
	m, _, pod := startSidecarPod(t, rt)
	ctx := context.Background()
	st, err := m.GetPodStatus(ctx, "uid1", "p", "ns")
	if err != nil {
		t.Fatal(err)
	}
	idOf := map[string]string{}
	for _, name := range []string{"side1", "side2", "app"} {
		cs := st.FindContainerStatusByName(name)
		if cs == nil || cs.State != kubecontainer.ContainerRunning {
			t.Fatalf("%s: %+v, want running", name, cs)
		}
		idOf[cs.ID] = name
	}
	if err := m.KillPod(ctx, pod, st, nil).Error(); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, id := range rt.ids {
		order = append(order, idOf[id])
	}
	if want := []string{"app", "side2", "side1"}; !slices.Equal(order, want) {
		t.Fatalf("stopped %v, want %v", order, want)
	}
}

// KillPastDeadline stops everything with ContainerKilled reason
// DeadlineExceeded.
func TestKillPastDeadline(t *testing.T) {
	rt := fakecri.New()
	m, events := newTestManager(t, rt)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1"})
	if err := syncOnce(t, m, pod).Error(); err != nil {
		t.Fatal(err)
	}
	st, err := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.KillPastDeadline(context.Background(), pod, st).Error(); err != nil {
		t.Fatal(err)
	}
	killed := events.of(schemas.EventContainerKilled)
	if len(killed) != 1 || killed[0].Reason != schemas.ReasonDeadlineExceeded {
		t.Fatalf("ContainerKilled %+v, want one with reason DeadlineExceeded", killed)
	}
	if n := events.count(schemas.EventSandboxStopped); n != 1 {
		t.Fatalf("%d SandboxStopped, want 1", n)
	}
}

// Two sidecars that crashed while the pod runs are restarted in one sync, in
// spec order (as they first started): the first sidecar's ContainerStarted
// comes before the second's, as does its InitContainer action.
func TestCrashedSidecarsRestartInSpecOrder(t *testing.T) {
	rt := fakecri.New()
	m, events, pod := startSidecarPod(t, rt)
	before := len(events.of(schemas.EventContainerStarted))
	rt.Exit("side1", 1)
	rt.Exit("side2", 1)
	res := syncOnce(t, m, pod)
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range res.ActionResults() {
		if a.Action == schemas.ActionInitContainer {
			actions = append(actions, a.Target)
		}
	}
	var started []string
	for _, ev := range events.of(schemas.EventContainerStarted)[before:] {
		started = append(started, ev.Container)
	}
	want := []string{"side1", "side2"}
	if !slices.Equal(actions, want) {
		t.Errorf("InitContainer actions %v, want %v", actions, want)
	}
	if !slices.Equal(started, want) {
		t.Errorf("ContainerStarted for %v, want %v", started, want)
	}
}
