package reconcile

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// resize applies the plan's in-place resizes, as kubelet's
// doPodResizeAction: memory first, then cpu, each in the plan's order
// (decreases before increases), the pod cgroup's value of a resource raised
// before its containers' and lowered after them. A container's update
// carries the values of the other resource it has now, as the runtime
// replaces all of them. The first failure ends the step: updates must
// succeed in this order, and the next sync retries what is left (the pod
// workers retry a failed sync). The pod's resize error (its
// PodResizeInProgress condition) is set by a failure and cleared once every
// update succeeded.
func (s *podOperation) resize(ctx context.Context, updates map[corev1.ResourceName][]ContainerToUpdate, pod *PodResourcesUpdate) {
	if len(updates) == 0 && pod == nil {
		s.m.reasons.clearResizeError(s.ref.UID)
		return
	}
	var podApplied *runtimeapi.LinuxContainerResources
	if pod != nil {
		podApplied = cgroupValues(pod.Current)
	}
	resizePod := func(name corev1.ResourceName) bool {
		if err := s.resizePodCgroup(ctx, pod, name, podApplied); err != nil {
			msg := fmt.Sprintf("resize of the pod cgroup (%s): %v", name, err)
			s.result.Fail(schemas.ActionUpdatePodSandboxResources, s.ref.UID, kubecontainer.ErrResize, msg)
			s.m.reasons.setResizeError(s.ref.UID, msg)
			s.m.resizeErrorEvent(ctx, s.ref, ContainerToUpdate{}, msg)
			return false
		}
		return true
	}
	applied := map[string]ResourceValues{} // by container id, once updated
	for _, name := range resizeOrder {
		podGrows := pod != nil && grows(name, pod.Desired, podApplied)
		if podGrows && !resizePod(name) {
			return
		}
		for _, u := range updates[name] {
			from, ok := applied[u.ID]
			if !ok {
				from = u.Current
			}
			to := from
			if name == corev1.ResourceMemory {
				to.MemoryLimit = u.Desired.MemoryLimit
			} else {
				to.CPULimit, to.CPURequest = u.Desired.CPULimit, u.Desired.CPURequest
			}
			if err := s.updateContainerResources(ctx, u, from, to); err != nil {
				msg := fmt.Sprintf("resize of container %s (%s): %v", u.Name, name, err)
				s.result.Fail(schemas.ActionUpdateContainerResources, u.Name, kubecontainer.ErrResize, msg)
				s.m.reasons.setResizeError(s.ref.UID, msg)
				s.m.resizeErrorEvent(ctx, s.ref, u, msg)
				return
			}
			applied[u.ID] = to
			s.result.Add(schemas.ActionUpdateContainerResources, u.Name, resizedMessage(name, from, to))
		}
		if pod != nil && !podGrows && !resizePod(name) {
			return
		}
	}
	s.m.reasons.clearResizeError(s.ref.UID)
}

// grows reports whether the pod cgroup's value of name goes up from
// applied to desired: a memory limit, or (cpu) a quota, or the shares at
// the same quota.
func grows(name corev1.ResourceName, desired, applied *runtimeapi.LinuxContainerResources) bool {
	if name == corev1.ResourceMemory {
		return desired.MemoryLimitInBytes > applied.MemoryLimitInBytes
	}
	was, is := quotaToMilliCPU(applied.CpuQuota, applied.CpuPeriod), quotaToMilliCPU(desired.CpuQuota, desired.CpuPeriod)
	return is > was || is == was && desired.CpuShares > applied.CpuShares
}

// updateContainerResources gives the instance u the values to, in the
// resources its spec makes otherwise (hugepages stay). A memory limit is not
// lowered to or below what the container uses (kubelet checks the pod's
// cgroup; jetlet has no pod limit, so it checks the container's): the
// kernel would reclaim or OOM-kill to get there.
func (s *podOperation) updateContainerResources(ctx context.Context, u ContainerToUpdate, from, to ResourceValues) error {
	m := s.m
	if to.MemoryLimit != 0 && (from.MemoryLimit == 0 || to.MemoryLimit < from.MemoryLimit) {
		stats, err := m.rt.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{Id: u.ID})
		if err != nil {
			return fmt.Errorf("read memory usage: %w", err)
		}
		for _, st := range stats {
			if usage := st.GetMemory().GetUsageBytes().GetValue(); usage >= uint64(to.MemoryLimit) {
				return fmt.Errorf("aborting attempt to set memory limit %s, not above current memory usage %s",
					resource.NewQuantity(to.MemoryLimit, resource.BinarySI), resource.NewQuantity(int64(usage), resource.BinarySI))
			}
		}
	}
	c := u.Container.DeepCopy()
	c.Resources.Requests = withQuantity(c.Resources.Requests, corev1.ResourceCPU, resource.NewMilliQuantity(to.CPURequest, resource.DecimalSI))
	c.Resources.Limits = withQuantity(c.Resources.Limits, corev1.ResourceCPU, resource.NewMilliQuantity(to.CPULimit, resource.DecimalSI))
	c.Resources.Limits = withQuantity(c.Resources.Limits, corev1.ResourceMemory, resource.NewQuantity(to.MemoryLimit, resource.BinarySI))
	resources := m.linuxResources(c)
	m.cfg.Swap.configureSwap(resources, s.pod, c)
	if err := m.rt.UpdateContainerResources(ctx, u.ID, &runtimeapi.ContainerResources{Linux: resources}); err != nil {
		return err
	}
	// Its cached status holds the old resources, and its listed state
	// does not change: read it again.
	m.cache.forgetContainer(s.ref.UID, u.ID)
	return nil
}

// resizedMessage says what an update changed: "memory limit 128Mi -> 256Mi",
// "cpu request/limit 100m/500m -> 250m/1".
func resizedMessage(name corev1.ResourceName, from, to ResourceValues) string {
	if name == corev1.ResourceMemory {
		return fmt.Sprintf("memory limit %s -> %s", memoryString(from.MemoryLimit), memoryString(to.MemoryLimit))
	}
	return fmt.Sprintf("cpu request/limit %s/%s -> %s/%s", cpuString(from.CPURequest), cpuString(from.CPULimit), cpuString(to.CPURequest), cpuString(to.CPULimit))
}

// withQuantity is list with name set to q, or without name when q is zero.
func withQuantity(list corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity) corev1.ResourceList {
	if list == nil {
		list = corev1.ResourceList{}
	}
	if q.IsZero() {
		delete(list, name)
	} else {
		list[name] = *q
	}
	return list
}
