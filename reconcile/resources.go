package reconcile

import (
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	minShares     = 2
	maxShares     = 262144
	sharesPerCPU  = 1024
	milliCPUToCPU = 1000
	// minQuotaPeriod is the smallest CFS quota, 1 ms.
	minQuotaPeriod = 1000
)

func milliCPUToShares(milliCPU int64) int64 {
	if milliCPU == 0 {
		return minShares
	}
	shares := milliCPU * sharesPerCPU / milliCPUToCPU
	return max(minShares, min(shares, maxShares))
}

func milliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	return max(milliCPU*period/milliCPUToCPU, minQuotaPeriod)
}

// linuxResources maps requests and limits as kubelet does: shares from the
// CPU request (or the limit when no request is given), a CFS quota from the
// CPU limit, the memory limit as is.
func (m *Manager) linuxResources(c *corev1.Container) *runtimeapi.LinuxContainerResources {
	r := &runtimeapi.LinuxContainerResources{}
	cpuLimit := c.Resources.Limits.Cpu()
	if req, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
		r.CpuShares = milliCPUToShares(req.MilliValue())
	} else if !cpuLimit.IsZero() {
		r.CpuShares = milliCPUToShares(cpuLimit.MilliValue())
	} else {
		r.CpuShares = minShares
	}
	if mem := c.Resources.Limits.Memory().Value(); mem != 0 {
		r.MemoryLimitInBytes = mem
	}
	if !m.cfg.DisableCPUQuota {
		r.CpuPeriod = defaultCPUPeriod
		r.CpuQuota = milliCPUToQuota(cpuLimit.MilliValue(), defaultCPUPeriod)
	}
	return r
}
