package reconcile

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/admission"
	"github.com/jetlet/jetlet/reconcile/eviction"
)

// SwapBehavior is kubelet's memorySwap.swapBehavior (--memory-swap-behavior).
type SwapBehavior string

const (
	// NoSwap keeps every container out of swap (kubelet's default).
	NoSwap SwapBehavior = "NoSwap"
	// LimitedSwap gives the containers of Burstable pods a share of the
	// node's swap in proportion to their memory request (cgroup v2 only).
	LimitedSwap SwapBehavior = "LimitedSwap"
)

// ParseSwapBehavior reads --memory-swap-behavior; empty is NoSwap, as kubelet
// defaults it.
func ParseSwapBehavior(s string) (SwapBehavior, error) {
	b := SwapBehavior(s)
	if b == "" {
		b = NoSwap
	}
	return b, MemorySwap{Behavior: b}.Validate()
}

// cgroup2SwapMax is the cgroup v2 file of a container's swap limit, which
// kubelet sends in LinuxContainerResources.Unified (containerd writes it).
const cgroup2SwapMax = "memory.swap.max"

// MemorySwap is kubelet's NodeSwap configuration with the facts of the node
// it needs (cadvisor's machine info and the cgroups' swap controller).
type MemorySwap struct {
	// Behavior is NoSwap (the default) or LimitedSwap.
	Behavior SwapBehavior
	// Accounted says the pods' cgroups account swap (memory.swap.max on
	// cgroup v2, memory.memsw.* on v1: kubelet's swapControllerAvailable).
	// Without it no swap setting is sent.
	Accounted bool
	// CgroupV1 says the node's cgroups are v1, which has no swap limit of
	// its own: LimitedSwap is refused, NoSwap caps memory and swap together
	// at the memory limit.
	CgroupV1 bool
	// NodeMemory and NodeSwap are the machine's memory and swap in bytes
	// (MemTotal and SwapTotal), what a LimitedSwap share is computed from.
	NodeMemory, NodeSwap int64
}

// Validate refuses an unknown behavior, and LimitedSwap on cgroup v1 (as
// kubelet does at start).
func (s MemorySwap) Validate() error {
	if s.Behavior != NoSwap && s.Behavior != LimitedSwap {
		return fmt.Errorf("%w: swap behavior %q: want %s or %s", ErrInvalidConfig, s.Behavior, NoSwap, LimitedSwap)
	}
	if s.Behavior == LimitedSwap && s.CgroupV1 {
		return fmt.Errorf("%w: swap behavior %s needs cgroup v2 (memory.swap.max); this node's cgroups are v1, where only %s is supported", ErrInvalidConfig, LimitedSwap, NoSwap)
	}
	return nil
}

// containerSwapBehavior is kubelet's GetContainerSwapBehavior: LimitedSwap
// only for a container of a Burstable pod that is not critical and whose
// memory request is set and below its limit; NoSwap for every other.
func (s MemorySwap) containerSwapBehavior(pod *corev1.Pod, c *corev1.Container) SwapBehavior {
	if s.Behavior != LimitedSwap || !s.Accounted || s.CgroupV1 || eviction.IsCritical(pod) {
		return NoSwap
	}
	request, limit := c.Resources.Requests.Memory(), c.Resources.Limits.Memory()
	noMemory := request.IsZero() && limit.IsZero()
	if admission.PodQOS(pod) != corev1.PodQOSBurstable || noMemory || request.Cmp(*limit) == 0 {
		return NoSwap
	}
	return LimitedSwap
}

// configureSwap sets r's swap limit as kubelet's configureContainerSwapResources
// does: nothing without a swap controller; under LimitedSwap the container's
// share of the node's swap in memory.swap.max; under NoSwap 0 there (cgroup
// v2), or memory and swap capped together at the memory limit (cgroup v1).
func (s MemorySwap) configureSwap(r *runtimeapi.LinuxContainerResources, pod *corev1.Pod, c *corev1.Container) {
	if !s.Accounted {
		return
	}
	if s.CgroupV1 {
		r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
		return
	}
	var swap int64
	if s.containerSwapBehavior(pod, c) == LimitedSwap {
		// A share that cannot be computed is no swap, as kubelet's.
		swap, _ = calcSwapForBurstablePods(c.Resources.Requests.Memory().Value(), s.NodeMemory, s.NodeSwap)
	}
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified[cgroup2SwapMax] = strconv.FormatInt(swap, 10)
}

// calcSwapForBurstablePods is kubelet's: the container's memory request as a
// share of the node's memory, times the node's swap, in float64 as kubelet
// computes it.
func calcSwapForBurstablePods(containerMemoryRequest, nodeTotalMemory, totalPodsSwapAvailable int64) (int64, error) {
	if nodeTotalMemory <= 0 {
		return 0, fmt.Errorf("total node memory is 0")
	}
	if containerMemoryRequest > nodeTotalMemory {
		return 0, fmt.Errorf("container request %d is larger than total node memory %d", containerMemoryRequest, nodeTotalMemory)
	}
	share := float64(containerMemoryRequest) / float64(nodeTotalMemory)
	return int64(share * float64(totalPodsSwapAvailable)), nil
}
