package e2e_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// resizable is revision rev of a long-running pod whose one container is
// limited to memory (requesting 32Mi and 50m of cpu, limited to 200m).
func resizable(t testing.TB, uid string, rev int64, memory string) string {
	return editPod(t, podJSON(uid, rev, "Always", "exec sleep 3600"), func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse(memory)},
		}
	})
}

// requestingMemory is the resizable pod asking memory as request and limit.
func requestingMemory(t testing.TB, uid string, rev int64, memory string) string {
	return editPod(t, resizable(t, uid, rev, memory), func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(memory)
	})
}

// memoryLimit is the memory limit in the cgroup of container id.
func memoryLimit(t testing.TB, cri *runtime.Client, id string) string {
	t.Helper()
	resp, err := cri.ContainerStatus(t.Context(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	return jetlettest.ContainerCgroupFile(t, resp, "memory", "memory.limit_in_bytes", "memory.max")
}

// podCondition is the pod's condition of type typ, or nil.
func podCondition(st *schemas.PodStatus, typ schemas.PodConditionType) *schemas.PodCondition {
	if i := slices.IndexFunc(st.Conditions, func(c schemas.PodCondition) bool { return c.Type == typ }); i >= 0 {
		return &st.Conditions[i]
	}
	return nil
}

// Through `jetlet run`: a new intent raising the running container's memory
// limit is applied in place (UpdateContainerResources; the same instance,
// restart count 0, the cgroup's limit raised, the status showing the
// applied and allocated resources, ResizeStarted then ResizeCompleted); one
// asking more memory than the node has is Infeasible: pending, nothing
// changed, ResizeInfeasible.
func TestAResizeChangesTheCgroupWithoutARestart(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	cri := criClient(t, n)
	n.publish("resize", resizable(t, "resize", 1, "128Mi"))
	st := n.waitStatus("resize", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	id := st.Containers[0].ContainerID
	if got := memoryLimit(t, cri, id); got != strconv.Itoa(128<<20) {
		t.Fatalf("memory limit at start = %s", got)
	}

	published := time.Now()
	n.publish("resize", resizable(t, "resize", 2, "256Mi"))
	poll.Until(t, 30*time.Second, poll.Msg("the cgroup's memory limit raised to 256Mi"), func() bool {
		return memoryLimit(t, cri, id) == strconv.Itoa(256<<20)
	})
	t.Logf("from the intent published to the new limit in the cgroup: %s (polled every %s)", time.Since(published), poll.Interval)
	r := n.results("resize", 2)[1]
	if r.Outcome != schemas.OutcomeSynced || !slices.ContainsFunc(r.Actions, func(a schemas.ActionResult) bool {
		return a.Action == schemas.ActionUpdateContainerResources && a.Target == "app"
	}) || slices.ContainsFunc(r.Actions, func(a schemas.ActionResult) bool { return a.Action == schemas.ActionKillContainer }) {
		t.Fatalf("result of the resize: %s %+v; want Synced with UpdateContainerResources and no kill", r.Outcome, r.Actions)
	}
	st = n.waitStatus("resize", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Revision == 2 })
	c := st.Containers[0]
	if c.ContainerID != id || c.RestartCount != 0 || c.State != schemas.ContainerRunning {
		t.Errorf("after the resize: %s, restart count %d, %s; want %s, 0, Running", c.ContainerID, c.RestartCount, c.State, id)
	}
	if c.Resources == nil || c.Resources.Limits.Memory().Value() != 256<<20 || c.AllocatedResources.Memory().Value() != 32<<20 {
		t.Errorf("status resources %+v, allocated %v; want a 256Mi limit applied, 32Mi allocated", c.Resources, c.AllocatedResources)
	}
	if podCondition(st, schemas.PodResizeInProgress) != nil || podCondition(st, schemas.PodResizePending) != nil {
		t.Errorf("conditions after the resize: %+v", st.Conditions)
	}
	n.waitEvent("resize", schemas.EventResizeStarted, 30*time.Second, nil)
	n.waitEvent("resize", schemas.EventResizeCompleted, 30*time.Second, nil)

	n.publish("resize", requestingMemory(t, "resize", 3, "64Ti"))
	st = n.waitStatus("resize", 30*time.Second, func(st *schemas.PodStatus) bool {
		c := podCondition(st, schemas.PodResizePending)
		return st.Revision == 3 && c != nil && c.Reason == "Infeasible"
	})
	if c := st.Containers[0]; c.ContainerID != id || c.RestartCount != 0 || c.AllocatedResources.Memory().Value() != 32<<20 {
		t.Errorf("after an infeasible resize: %s, restart count %d, allocated %v; want %s, 0, 32Mi", c.ContainerID, c.RestartCount, c.AllocatedResources, id)
	}
	if got := memoryLimit(t, cri, id); got != strconv.Itoa(256<<20) {
		t.Errorf("an infeasible resize changed the cgroup: %s", got)
	}
	n.waitEvent("resize", schemas.EventResizeInfeasible, 30*time.Second, func(ev schemas.LifecycleEvent) bool { return ev.Reason == "Infeasible" })
}

// BenchmarkResizeIntentToCgroup measures, through `jetlet run` on the
// embedded runtime, the time from publishing an intent with a new memory
// limit to the limit in the running container's cgroup (read every 1 ms),
// alternating between two limits:
//
//	go test -run '^$' -bench BenchmarkResizeIntentToCgroup -benchtime 50x ./test/e2e
func BenchmarkResizeIntentToCgroup(b *testing.B) {
	n := startNode(b, shortDir(b), "")
	cri := criClient(b, n)
	n.publish("bench", resizable(b, "bench", 1, "128Mi"))
	id := n.waitStatus("bench", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning }).Containers[0].ContainerID
	var latencies []time.Duration
	b.ResetTimer()
	for i := range b.N {
		memory, bytes := "256Mi", strconv.Itoa(256<<20)
		if i%2 == 1 {
			memory, bytes = "128Mi", strconv.Itoa(128<<20)
		}
		start := time.Now()
		n.publish("bench", resizable(b, "bench", int64(i+2), memory))
		for memoryLimit(b, cri, id) != bytes {
			if time.Since(start) > 30*time.Second {
				b.Fatalf("resize %d: the cgroup never held %s", i, memory)
			}
			time.Sleep(time.Millisecond)
		}
		latencies = append(latencies, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
}

// withPodLimits is revision rev of a long-running pod whose container sets
// no resources, limited at the pod level to cpu and memory (requests
// defaulted from them: Guaranteed).
func withPodLimits(t testing.TB, uid string, rev int64, cpu, memory string) string {
	return editPod(t, podJSON(uid, rev, "Always", "exec sleep 3600"), func(p *corev1.Pod) {
		p.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}
	})
}

// podCgroupFile reads a file of the pod cgroup of container id.
func podCgroupFile(t testing.TB, cri *runtime.Client, id, controller, v1, v2 string) string {
	t.Helper()
	resp, err := cri.ContainerStatus(t.Context(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	return jetlettest.PodCgroupFile(t, resp, controller, v1, v2)
}

// Through `jetlet run`: pod-level limits (KEP-2837) are the pod cgroup's
// (memory.max, cpu.max); a new intent changing
// them resizes the pod cgroup in place (KEP-5419: UpdatePodSandboxResources,
// the container kept, ResizeStarted then ResizeCompleted); one asking more
// memory than the node has is Infeasible and changes nothing.
func TestPodLevelResourcesLimitThePodCgroup(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	cri := criClient(t, n)
	n.publish("podres", withPodLimits(t, "podres", 1, "500m", "128Mi"))
	st := n.waitStatus("podres", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	id := st.Containers[0].ContainerID
	memory := func() string { return podCgroupFile(t, cri, id, "memory", "memory.limit_in_bytes", "memory.max") }
	quota := func() string { return podCgroupFile(t, cri, id, "cpu", "cpu.cfs_quota_us", "cpu.max") }
	if got := memory(); got != strconv.Itoa(128<<20) {
		t.Fatalf("pod cgroup memory limit at start = %s, want %d", got, 128<<20)
	}
	if got := quota(); !strings.HasPrefix(got, "50000") {
		t.Fatalf("pod cgroup cpu quota at start = %s, want 50000", got)
	}

	n.publish("podres", withPodLimits(t, "podres", 2, "1", "256Mi"))
	poll.Until(t, 30*time.Second, poll.Msg("the pod cgroup's limits raised to 256Mi and 1 cpu"), func() bool {
		return memory() == strconv.Itoa(256<<20) && strings.HasPrefix(quota(), "100000")
	})
	r := n.results("podres", 2)[1]
	if r.Outcome != schemas.OutcomeSynced || !slices.ContainsFunc(r.Actions, func(a schemas.ActionResult) bool {
		return a.Action == schemas.ActionUpdatePodSandboxResources
	}) || slices.ContainsFunc(r.Actions, func(a schemas.ActionResult) bool { return a.Action == schemas.ActionKillContainer }) {
		t.Fatalf("result of the resize: %s %+v; want Synced with UpdatePodSandboxResources and no kill", r.Outcome, r.Actions)
	}
	st = n.waitStatus("podres", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Revision == 2 })
	if c := st.Containers[0]; c.ContainerID != id || c.RestartCount != 0 || c.State != schemas.ContainerRunning {
		t.Errorf("after the resize: %s, restart count %d, %s; want %s, 0, Running", c.ContainerID, c.RestartCount, c.State, id)
	}
	if podCondition(st, schemas.PodResizeInProgress) != nil || podCondition(st, schemas.PodResizePending) != nil {
		t.Errorf("conditions after the resize: %+v", st.Conditions)
	}
	n.waitEvent("podres", schemas.EventResizeStarted, 30*time.Second, nil)
	n.waitEvent("podres", schemas.EventResizeCompleted, 30*time.Second, nil)

	n.publish("podres", withPodLimits(t, "podres", 3, "1", "64Ti"))
	st = n.waitStatus("podres", 30*time.Second, func(st *schemas.PodStatus) bool {
		c := podCondition(st, schemas.PodResizePending)
		return st.Revision == 3 && c != nil && c.Reason == "Infeasible"
	})
	if got := memory(); got != strconv.Itoa(256<<20) {
		t.Errorf("an infeasible resize changed the pod cgroup: %s", got)
	}
}
