package reconcile

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCalcSwapForBurstablePods(t *testing.T) {
	const gi = int64(1) << 30
	for _, tc := range []struct {
		request, memory, swap, want int64
		fails                       bool
	}{
		{request: gi, memory: 40 * gi, swap: 5 * gi, want: 134217728}, // 1/40 of 5Gi: 128Mi
		{request: 10 * gi, memory: 40 * gi, swap: 5 * gi, want: 1342177280},
		{request: 40 * gi, memory: 40 * gi, swap: 5 * gi, want: 5 * gi},
		{request: 1 << 20, memory: 3 * gi, swap: 0, want: 0},
		// float64 and truncation, as kubelet: 1/3 of 1000 bytes.
		{request: gi, memory: 3 * gi, swap: 1000, want: 333},
		{request: 41 * gi, memory: 40 * gi, swap: 5 * gi, fails: true},
		{request: gi, memory: 0, swap: 5 * gi, fails: true},
	} {
		got, err := calcSwapForBurstablePods(tc.request, tc.memory, tc.swap)
		if (err != nil) != tc.fails || got != tc.want {
			t.Errorf("calcSwapForBurstablePods(%d, %d, %d) = %d, %v; want %d, failing %v", tc.request, tc.memory, tc.swap, got, err, tc.want, tc.fails)
		}
	}
}

// TestConfigureSwap runs kubelet's rows of GetContainerSwapBehavior and
// configureContainerSwapResources: which container gets which swap limit
// under each behavior and cgroup version.
func TestConfigureSwap(t *testing.T) {
	const gi = int64(1) << 30
	resources := func(request, limit string) corev1.ResourceRequirements {
		var r corev1.ResourceRequirements
		if request != "" {
			r.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(request)}
		}
		if limit != "" {
			r.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}
		}
		return r
	}
	guaranteed := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceCPU: resource.MustParse("1")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceCPU: resource.MustParse("1")},
	}
	v2 := MemorySwap{Behavior: LimitedSwap, Accounted: true, NodeMemory: 40 * gi, NodeSwap: 5 * gi}
	noSwapV2 := v2
	noSwapV2.Behavior = NoSwap
	v1 := MemorySwap{Behavior: NoSwap, Accounted: true, CgroupV1: true, NodeMemory: 40 * gi, NodeSwap: 5 * gi}
	unaccounted := v2
	unaccounted.Accounted = false
	critical := ptr(int32(2_000_000_000))
	for _, tc := range []struct {
		name     string
		swap     MemorySwap
		c        corev1.ResourceRequirements
		others   []corev1.ResourceRequirements // the pod's other containers
		priority *int32
		// wantMax is memory.swap.max in Unified ("": not set); wantV1 the
		// MemorySwapLimitInBytes.
		wantMax string
		wantV1  int64
	}{
		{name: "burstable, request below limit", swap: v2, c: resources("1Gi", "2Gi"), wantMax: "134217728"},
		{name: "burstable, request only", swap: v2, c: resources("10Gi", ""), wantMax: "1342177280"},
		{name: "burstable pod, this container's request at its limit", swap: v2, c: resources("1Gi", "1Gi"), others: []corev1.ResourceRequirements{resources("1Gi", "")}, wantMax: "0"},
		{name: "burstable pod, this container asks for no memory", swap: v2, c: corev1.ResourceRequirements{}, others: []corev1.ResourceRequirements{resources("1Gi", "")}, wantMax: "0"},
		{name: "guaranteed", swap: v2, c: guaranteed, wantMax: "0"},
		{name: "best effort", swap: v2, c: corev1.ResourceRequirements{}, wantMax: "0"},
		{name: "critical", swap: v2, c: resources("1Gi", "2Gi"), priority: critical, wantMax: "0"},
		{name: "request above the node's memory", swap: v2, c: resources("41Gi", ""), wantMax: "0"},
		{name: "NoSwap on v2", swap: noSwapV2, c: resources("1Gi", "2Gi"), wantMax: "0"},
		{name: "NoSwap on v1: memory and swap at the limit", swap: v1, c: resources("1Gi", "2Gi"), wantV1: 2 * gi},
		{name: "NoSwap on v1 without a limit", swap: v1, c: resources("1Gi", ""), wantV1: 0},
		{name: "no swap controller", swap: unaccounted, c: resources("1Gi", "2Gi")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Priority: tc.priority, Containers: []corev1.Container{{Name: "c", Resources: tc.c}}}}
			for _, o := range tc.others {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "o", Resources: o})
			}
			r := &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: tc.c.Limits.Memory().Value()}
			tc.swap.configureSwap(r, pod, &pod.Spec.Containers[0])
			if got := r.GetUnified()[cgroup2SwapMax]; got != tc.wantMax {
				t.Errorf("memory.swap.max = %q, want %q", got, tc.wantMax)
			}
			if r.MemorySwapLimitInBytes != tc.wantV1 {
				t.Errorf("MemorySwapLimitInBytes = %d, want %d", r.MemorySwapLimitInBytes, tc.wantV1)
			}
		})
	}
}

func TestSwapBehaviorRefusals(t *testing.T) {
	if b, err := ParseSwapBehavior(""); b != NoSwap || err != nil {
		t.Errorf("ParseSwapBehavior(\"\") = %q, %v; want NoSwap (kubelet's default)", b, err)
	}
	if _, err := ParseSwapBehavior("UnlimitedSwap"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("UnlimitedSwap (gone since 1.30): %v, want ErrInvalidConfig", err)
	}
	err := MemorySwap{Behavior: LimitedSwap, CgroupV1: true}.Validate()
	if !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("LimitedSwap on cgroup v1: %v, want ErrInvalidConfig", err)
	}
	if err := (MemorySwap{Behavior: NoSwap, CgroupV1: true}).Validate(); err != nil {
		t.Errorf("NoSwap on cgroup v1: %v", err)
	}
}
