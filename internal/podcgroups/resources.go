package podcgroups

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/component-helpers/resource"
)

// Resources are the limits of one pod or QoS cgroup, kubelet's
// ResourceConfig; nil leaves a value as it is.
type Resources struct {
	// CPUShares is cpu.shares (v1), cpu.weight converted (v2).
	CPUShares *uint64
	// CPUQuota is the CFS quota in µs per CPUPeriod; -1: none.
	CPUQuota  *int64
	CPUPeriod *uint64
	// Memory is the memory limit in bytes.
	Memory *int64
	// PidsLimit is pids.max; -1: none.
	PidsLimit *int64
}

// kubelet's bounds of CPU shares and quota.
const (
	minShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	milliCPUToCPU = 1000
	minQuotaUsec  = 1000
)

// milliCPUToShares is kubelet's MilliCPUToShares: a request of m milli-CPUs
// as shares, 2 for none.
func milliCPUToShares(m int64) uint64 {
	if m == 0 {
		return minShares
	}
	shares := m * sharesPerCPU / milliCPUToCPU
	return uint64(min(max(shares, minShares), maxShares))
}

// milliCPUToQuota is kubelet's MilliCPUToQuota: a limit of m milli-CPUs as a
// CFS quota per period µs, 0 for none, at least 1 ms.
func milliCPUToQuota(m, period int64) int64 {
	if m == 0 {
		return 0
	}
	return max(m*period/milliCPUToCPU, minQuotaUsec)
}

// podResources is kubelet's ResourceConfigForPod: CPU shares from the pod's
// requests; a CPU quota and a memory limit from
// its limits, for a Burstable pod only when every container sets that limit;
// BestEffort pods get the minimum shares only. Overhead counts, as kubelet's.
// No huge pages and no memory QoS (kubelet's MemoryQoS gate, off).
func podResources(pod *corev1.Pod, qos corev1.PodQOSClass, period uint64) Resources {
	cpuLimited, memLimited := true, true
	for i := range pod.Spec.Containers {
		l := pod.Spec.Containers[i].Resources.Limits
		cpuLimited = cpuLimited && !l.Cpu().IsZero()
		memLimited = memLimited && !l.Memory().IsZero()
	}
	if pl := pod.Spec.Resources; pl != nil { // pod-level limits stand for the containers'
		cpuLimited = cpuLimited || !pl.Limits.Cpu().IsZero()
		memLimited = memLimited || !pl.Limits.Memory().IsZero()
	}
	limits := resource.PodLimits(pod, resource.PodResourcesOptions{})
	shares := milliCPUToShares(cpuRequestMilli(pod))
	quota := milliCPUToQuota(limits.Cpu().MilliValue(), int64(period))
	memory := limits.Memory().Value()
	switch qos {
	case corev1.PodQOSGuaranteed:
		return Resources{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &memory}
	case corev1.PodQOSBurstable:
		r := Resources{CPUShares: &shares}
		if cpuLimited {
			r.CPUQuota, r.CPUPeriod = &quota, &period
		}
		if memLimited {
			r.Memory = &memory
		}
		return r
	default:
		minimum := uint64(minShares)
		return Resources{CPUShares: &minimum}
	}
}

// cpuRequestMilli is what a pod adds to its QoS level's shares (kubelet's
// setCPUCgroupConfig sums the Burstable pods' requests).
func cpuRequestMilli(pod *corev1.Pod) int64 {
	requests := resource.PodRequests(pod, resource.PodResourcesOptions{})
	return requests.Cpu().MilliValue()
}

// kubepodsResources are kubelet's limits of kubepods under
// --enforce-node-allocatable=pods: the node's allocatable CPU as shares, its
// memory and pids when set.
func kubepodsResources(allocatable corev1.ResourceList) Resources {
	var r Resources
	if cpu, ok := allocatable[corev1.ResourceCPU]; ok {
		shares := milliCPUToShares(cpu.MilliValue())
		r.CPUShares = &shares
	}
	if mem, ok := allocatable[corev1.ResourceMemory]; ok {
		v := mem.Value()
		r.Memory = &v
	}
	if pids, ok := allocatable["pid"]; ok {
		v := pids.Value()
		r.PidsLimit = &v
	}
	return r
}
