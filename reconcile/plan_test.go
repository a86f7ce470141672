package reconcile

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
)

// PlanPod names each step with kubelet's reason, on the fake runtime: a new
// pod, a spec change (which fields), a liveness failure, a resize, and a pod
// whose containers all ended (nothing runs: its sandbox is stopped).
func TestPlanPodSaysWhyEachStep(t *testing.T) {
	ctx := context.Background()
	m, _ := newTestManager(t, fakecri.New())
	pod := testPod(
		corev1.Container{Name: "a", Image: "img:1", Command: []string{"x"}},
		corev1.Container{Name: "b", Image: "img:1", Command: []string{"x"}},
	)
	steps := func(p schemas.PodPlan) []string {
		out := []string{"sandbox " + string(p.Sandbox.Action)}
		for _, s := range p.Containers {
			out = append(out, s.Name+" "+string(s.Action)+" "+s.Reason)
		}
		return out
	}
	if got, want := steps(m.PlanPod(pod, nil, nil)), []string{"sandbox create", "a start ", "b start "}; !slices.Equal(got, want) {
		t.Errorf("a new pod: %q, want %q", got, want)
	}
	st := syncedStatus(t, m, pod)

	changed := pod.DeepCopy()
	changed.Spec.Containers[0].Image, changed.Spec.Containers[0].Args = "img:2", []string{"-v"}
	plan := m.PlanPod(changed, st, pod)
	if got, want := steps(plan), []string{"sandbox keep", "a restart SpecChanged", "b keep "}; !slices.Equal(got, want) {
		t.Errorf("a spec change: %q, want %q", got, want)
	}
	if got := plan.Containers[0].Fields; !slices.Equal(got, []string{"args", "image"}) {
		t.Errorf("a's changed fields %q, want [args image]", got)
	}

	// A liveness failure: the plan, then the sync it stands for (the prober
	// syncs the pod at once, so this is where the two can be compared).
	m.cfg.Liveness = fakeProbes{st.FindContainerStatusByName("b").ID: kubecontainer.ProbeFailure}
	if got, want := steps(m.PlanPod(pod, st, pod)), []string{"sandbox keep", "a keep ", "b restart LivenessProbe"}; !slices.Equal(got, want) {
		t.Errorf("a liveness failure: %q, want %q", got, want)
	}
	var done []string
	for _, a := range m.SyncPod(ctx, pod, st).ActionResults() {
		done = append(done, a.Action+" "+a.Target)
	}
	if want := []string{"KillContainer b", "StartContainer b"}; !slices.Equal(done, want) {
		t.Errorf("the sync after a liveness failure did %q, the plan said %q", done, want)
	}
	m.cfg.Liveness = nil
	st = syncedStatus(t, m, pod)

	// A resize: resized in place, what to what; the sync does that.
	resized := pod.DeepCopy()
	resized.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	plan = m.PlanPod(resized, st, pod)
	if got, want := steps(plan), []string{"sandbox keep", "a keep ", "b resize "}; !slices.Equal(got, want) {
		t.Errorf("a resize: %q, want %q", got, want)
	}
	if got, want := plan.Containers[1].Message, "memory limit none, cpu 2m/none -> memory limit 64Mi, cpu 2m/none"; got != want {
		t.Errorf("the resize's message %q, want %q", got, want)
	}
	done = nil
	for _, a := range m.SyncPod(ctx, resized, st).ActionResults() {
		done = append(done, a.Action+" "+a.Target)
	}
	if want := []string{"UpdateContainerResources b"}; !slices.Equal(done, want) {
		t.Errorf("the sync of the resize did %q, the plan said resize b", done)
	}
	st = syncedStatus(t, m, pod)

	never := pod.DeepCopy()
	never.Spec.RestartPolicy = corev1.RestartPolicyNever
	ended := &kubecontainer.PodStatus{UID: st.UID, Name: st.Name, Namespace: st.Namespace, SandboxStatuses: st.SandboxStatuses}
	for _, cs := range st.ContainerStatuses {
		dead := *cs
		dead.State, dead.ExitCode = kubecontainer.ContainerExited, 0
		ended.ContainerStatuses = append(ended.ContainerStatuses, &dead)
	}
	if got, want := steps(m.PlanPod(never, ended, never)), []string{"sandbox kill", "a none ", "b none "}; !slices.Equal(got, want) {
		t.Errorf("every container ended: %q, want %q", got, want)
	}
}
