package reconcile_test

import (
	"os"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
)

// TestContainerSwapLimits runs a Burstable pod on the embedded runtime and
// reads its containers' swap limits from their cgroups. cgroup v2 (the
// guest): under LimitedSwap the container requesting 64Mi of a 4Gi node
// with 1Gi of swap gets memory.swap.max 16Mi (kubelet's share), its sibling
// whose request is its limit 0; under NoSwap both 0. cgroup v1 (CI's host):
// NoSwap caps memory and swap together at the memory limit
// (memory.memsw.limit_in_bytes).
func TestContainerSwapLimits(t *testing.T) {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	v2 := err == nil
	e := newEnv(t)
	burst := corev1.Container{Name: "burst", Image: "busybox:1.36", Command: []string{"sleep", "1000"}, Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
	}}
	fixed := burst
	fixed.Name = "fixed"
	fixed.Resources.Limits = fixed.Resources.Requests
	run := func(behavior reconcile.SwapBehavior) (burstID, fixedID string) {
		t.Helper()
		e.swap = reconcile.MemorySwap{Behavior: behavior, Accounted: true, CgroupV1: !v2, NodeMemory: 4 << 30, NodeSwap: 1 << 30}
		e.newManager()
		pod := makePod(uniqueName("swap"), corev1.RestartPolicyAlways, burst, fixed)
		mustSucceed(t, e.sync(pod))
		s := e.waitFor(pod, "both running", func(s *kubecontainer.PodStatus) bool {
			return newestState("burst", kubecontainer.ContainerRunning)(s) && newestState("fixed", kubecontainer.ContainerRunning)(s)
		})
		return s.FindContainerStatusByName("burst").ID, s.FindContainerStatusByName("fixed").ID
	}
	swapMax := func(id string) string {
		return e.cgroupValue(id, "memory", "memory.memsw.limit_in_bytes", "memory.swap.max")
	}

	if !v2 {
		burstID, fixedID := run(reconcile.NoSwap)
		for id, want := range map[string]int{burstID: 128 << 20, fixedID: 64 << 20} {
			if got := swapMax(id); got != strconv.Itoa(want) {
				t.Errorf("NoSwap on cgroup v1: memory.memsw.limit_in_bytes of %s = %s, want the memory limit %d", id, got, want)
			}
		}
		return
	}
	burstID, fixedID := run(reconcile.LimitedSwap)
	if got, want := swapMax(burstID), strconv.Itoa(16<<20); got != want {
		t.Errorf("LimitedSwap: memory.swap.max of the container requesting 64Mi = %s, want %s", got, want)
	}
	if got := swapMax(fixedID); got != "0" {
		t.Errorf("LimitedSwap: memory.swap.max of the container whose request is its limit = %s, want 0", got)
	}
	burstID, fixedID = run(reconcile.NoSwap)
	for _, id := range []string{burstID, fixedID} {
		if got := swapMax(id); got != "0" {
			t.Errorf("NoSwap: memory.swap.max of %s = %s, want 0", id, got)
		}
	}
}
