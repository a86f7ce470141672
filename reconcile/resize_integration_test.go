package reconcile_test

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
)

// uniqueName is name with a random suffix: the embedded runtime names pod
// cgroups after the uid, and other test binaries run pods beside this one.
func uniqueName(name string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return name + "-" + hex.EncodeToString(b[:])
}

func limits(cpu, memory string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
	}
}

// cgroupValue reads a file of the container's cgroup (jetlettest's
// ContainerCgroupFile).
func (e *env) cgroupValue(id, controller, v1, v2 string) string {
	e.t.Helper()
	resp, err := e.client.ContainerStatus(ctx(e.t), id, true)
	if err != nil {
		e.t.Fatal(err)
	}
	return jetlettest.ContainerCgroupFile(e.t, resp, controller, v1, v2)
}

// podCgroupValue reads a file of the pod cgroup of the container.
func (e *env) podCgroupValue(id, controller, v1, v2 string) string {
	e.t.Helper()
	resp, err := e.client.ContainerStatus(ctx(e.t), id, true)
	if err != nil {
		e.t.Fatal(err)
	}
	return jetlettest.PodCgroupFile(e.t, resp, controller, v1, v2)
}

// TestPodLevelResourcesResizeInPlace: a pod whose container sets no limits,
// with pod-level limits, has them in its pod cgroup; a change of them is
// applied to the pod cgroup in place (UpdatePodSandboxResources alone, the
// container kept), shown as no resize in progress once done.
func TestPodLevelResourcesResizeInPlace(t *testing.T) {
	e := newEnv(t)
	c := corev1.Container{Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "1000"}}
	pod := makePod(uniqueName("podres"), corev1.RestartPolicyAlways, c)
	podLevel := func(cpu, memory string) *corev1.ResourceRequirements {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
		return &corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
	}
	pod.Spec.Resources = podLevel("500m", "128Mi")
	mustSucceed(t, e.sync(pod))
	s := e.waitFor(pod, "app running", newestState("app", kubecontainer.ContainerRunning))
	id := s.FindContainerStatusByName("app").ID
	check := func(memBytes, cpuQuota int64) {
		t.Helper()
		if got := e.podCgroupValue(id, "memory", "memory.limit_in_bytes", "memory.max"); got != strconv.FormatInt(memBytes, 10) {
			t.Errorf("pod cgroup memory limit = %s, want %d", got, memBytes)
		}
		if got := e.podCgroupValue(id, "cpu", "cpu.cfs_quota_us", "cpu.max"); !strings.HasPrefix(got, strconv.FormatInt(cpuQuota, 10)) {
			t.Errorf("pod cgroup cpu quota = %s, want %d", got, cpuQuota)
		}
	}
	check(128<<20, 50000)

	pod.Spec.Resources = podLevel("1", "256Mi")
	if step := e.mgr.PlanPod(pod, e.status(pod), nil).Sandbox; step.Action != schemas.PlanResize ||
		step.Message != "pod memory limit 128Mi, cpu 500m/500m -> memory limit 256Mi, cpu 1/1" {
		t.Errorf("the plan's sandbox step %+v, want the pod cgroup's resize", step)
	}
	r := e.sync(pod)
	mustSucceed(t, r)
	if len(actionsOf(r, schemas.ActionUpdatePodSandboxResources)) != 2 || len(r.Actions) != 2 {
		t.Fatalf("pod-level resize: actions %+v, want UpdatePodSandboxResources for memory, then cpu", r.ActionResults())
	}
	check(256<<20, 100000)
	s = e.status(pod)
	if cs := s.FindContainerStatusByName("app"); cs.ID != id || cs.RestartCount != 0 || cs.State != kubecontainer.ContainerRunning {
		t.Fatalf("after the resize: %s restart count %d %s; want %s, 0, running", cs.ID, cs.RestartCount, cs.State, id)
	}
	for _, cond := range e.mgr.ToAPIStatus(pod, s).Conditions {
		if cond.Type == schemas.PodResizeInProgress {
			t.Errorf("resize still in progress after the sync: %+v", cond)
		}
	}
	if r := e.sync(pod); len(r.Actions) != 0 {
		t.Errorf("sync after the resize: %+v", r.ActionResults())
	}
}

func memoryLimitIn(e *env, id string) string {
	return e.cgroupValue(id, "memory", "memory.limit_in_bytes", "memory.max")
}

// TestResizeInPlace raises a running container's memory limit, then lowers
// it with its cpu limit: UpdateContainerResources each time, never a
// restart (same instance, restart count 0), the cgroup holding each new
// value and the status reading it back.
func TestResizeInPlace(t *testing.T) {
	e := newEnv(t)
	c := corev1.Container{Name: "app", Image: "busybox:1.36", Command: []string{"sleep", "1000"}, Resources: limits("200m", "128Mi")}
	pod := makePod(uniqueName("resize"), corev1.RestartPolicyAlways, c)
	mustSucceed(t, e.sync(pod))
	s := e.waitFor(pod, "app running", newestState("app", kubecontainer.ContainerRunning))
	id := s.FindContainerStatusByName("app").ID
	if got := memoryLimitIn(e, id); got != strconv.Itoa(128<<20) {
		t.Fatalf("memory limit at start = %s", got)
	}

	for _, step := range []struct {
		cpu, memory        string
		memBytes, cpuQuota int64
	}{
		{"200m", "256Mi", 256 << 20, 20000},
		{"500m", "96Mi", 96 << 20, 50000},
	} {
		pod.Spec.Containers[0].Resources = limits(step.cpu, step.memory)
		r := e.sync(pod)
		mustSucceed(t, r)
		if len(actionsOf(r, schemas.ActionUpdateContainerResources)) == 0 || len(actionsOf(r, schemas.ActionKillContainer)) != 0 || len(actionsOf(r, schemas.ActionStartContainer)) != 0 {
			t.Fatalf("resize to %s/%s: actions %+v, want UpdateContainerResources alone", step.cpu, step.memory, r.ActionResults())
		}
		s = e.status(pod)
		cs := s.FindContainerStatusByName("app")
		if cs.ID != id || cs.RestartCount != 0 || cs.State != kubecontainer.ContainerRunning {
			t.Fatalf("after the resize: %s restart count %d %s; want %s, 0, running", cs.ID, cs.RestartCount, cs.State, id)
		}
		if got := memoryLimitIn(e, id); got != strconv.FormatInt(step.memBytes, 10) {
			t.Errorf("memory limit in the cgroup = %s, want %d", got, step.memBytes)
		}
		if quota := e.cgroupValue(id, "cpu", "cpu.cfs_quota_us", "cpu.max"); !strings.HasPrefix(quota, strconv.FormatInt(step.cpuQuota, 10)) {
			t.Errorf("cpu quota in the cgroup = %s, want %d", quota, step.cpuQuota)
		}
		api := e.mgr.ToAPIStatus(pod, s)
		got := api.Containers[0].Resources
		if got == nil || got.Limits.Memory().Value() != step.memBytes || got.Limits.Cpu().Cmp(resource.MustParse(step.cpu)) != 0 {
			t.Errorf("status resources = %+v, want limits %s/%s", got, step.cpu, step.memory)
		}
		if api.Containers[0].AllocatedResources.Memory().Cmp(resource.MustParse("32Mi")) != 0 {
			t.Errorf("allocated resources = %v", api.Containers[0].AllocatedResources)
		}
		for _, cond := range api.Conditions {
			if cond.Type == schemas.PodResizeInProgress {
				t.Errorf("resize still in progress after the sync: %+v", cond)
			}
		}
		// Converged: the next sync does nothing.
		if r := e.sync(pod); len(r.Actions) != 0 {
			t.Errorf("sync after the resize: %+v", r.ActionResults())
		}
	}
}

// TestResizeRestartContainerPolicy: of two containers resized at once, the
// one whose resizePolicy says RestartContainer for memory is restarted with
// the new limit, the other resized in place.
func TestResizeRestartContainerPolicy(t *testing.T) {
	e := newEnv(t)
	keep := corev1.Container{Name: "keep", Image: "busybox:1.36", Command: []string{"sleep", "1000"}, Resources: limits("100m", "64Mi")}
	restart := keep
	restart.Name = "restart"
	restart.ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer}}
	pod := makePod(uniqueName("policy"), corev1.RestartPolicyAlways, keep, restart)
	mustSucceed(t, e.sync(pod))
	s := e.waitFor(pod, "both running", func(s *kubecontainer.PodStatus) bool {
		return newestState("keep", kubecontainer.ContainerRunning)(s) && newestState("restart", kubecontainer.ContainerRunning)(s)
	})
	keepID, restartID := s.FindContainerStatusByName("keep").ID, s.FindContainerStatusByName("restart").ID

	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Resources = limits("100m", "80Mi")
	}
	r := e.sync(pod)
	mustSucceed(t, r)
	if k := actionsOf(r, schemas.ActionKillContainer); len(k) != 1 || k[0].Target != "restart" {
		t.Errorf("kills = %+v, want the restart container's alone", k)
	}
	if u := actionsOf(r, schemas.ActionUpdateContainerResources); len(u) != 1 || u[0].Target != "keep" {
		t.Errorf("updates = %+v, want the keep container's alone", u)
	}
	s = e.waitFor(pod, "restart running again", func(s *kubecontainer.PodStatus) bool {
		cs := s.FindContainerStatusByName("restart")
		return cs.ID != restartID && cs.State == kubecontainer.ContainerRunning
	})
	if cs := s.FindContainerStatusByName("keep"); cs.ID != keepID || cs.RestartCount != 0 {
		t.Errorf("keep: %s restart count %d, want %s and 0", cs.ID, cs.RestartCount, keepID)
	}
	rs := s.FindContainerStatusByName("restart")
	if rs.RestartCount != 1 {
		t.Errorf("restart: restart count %d, want 1", rs.RestartCount)
	}
	for _, id := range []string{keepID, rs.ID} {
		if got := memoryLimitIn(e, id); got != strconv.Itoa(80<<20) {
			t.Errorf("container %s: memory limit %s, want %d", id[:8], got, 80<<20)
		}
	}
}
