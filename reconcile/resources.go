package reconcile

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
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

// sharesToMilliCPU and quotaToMilliCPU read CPU shares and a CFS quota back
// as a request and a limit, as kubelet's (the inverse of the two above, up to
// their rounding).
func sharesToMilliCPU(shares int64) int64 {
	if shares < minShares {
		return 0
	}
	return (shares*milliCPUToCPU + sharesPerCPU - 1) / sharesPerCPU
}

func quotaToMilliCPU(quota, period int64) int64 {
	if quota <= 0 || period <= 0 {
		return 0
	}
	return quota * milliCPUToCPU / period
}

// appliedResources are the resources a runtime reports a container has, as
// kubelet's convertToKubeContainerStatus reads them; nil when it reports
// none.
func appliedResources(r *runtimeapi.LinuxContainerResources) *kubecontainer.ContainerResources {
	if r == nil {
		return nil
	}
	out := &kubecontainer.ContainerResources{}
	if m := quotaToMilliCPU(r.CpuQuota, r.CpuPeriod); m > 0 {
		out.CPULimit = resource.NewMilliQuantity(m, resource.DecimalSI)
	}
	if m := sharesToMilliCPU(r.CpuShares); m > 0 {
		out.CPURequest = resource.NewMilliQuantity(m, resource.DecimalSI)
	}
	if r.MemoryLimitInBytes > 0 {
		out.MemoryLimit = resource.NewQuantity(r.MemoryLimitInBytes, resource.BinarySI)
	}
	return out
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
func (m *Kuberuntime) linuxResources(c *corev1.Container) *runtimeapi.LinuxContainerResources {
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
	r.HugepageLimits = hugepageLimits(c.Resources.Limits)
	return r
}

// hugePageUnits are the CRI's page size units, kubelet's
// HugePageUnitSizeFromByteSize.
var hugePageUnits = []string{"B", "KB", "MB", "GB", "TB", "PB"}

// hugepageLimits are the container's hugepages-<size> limits, by page size
// ("2MB"), in page size order. Sizes the validator let through always parse.
func hugepageLimits(limits corev1.ResourceList) []*runtimeapi.HugepageLimit {
	type limit struct {
		bytes int64
		out   *runtimeapi.HugepageLimit
	}
	var all []limit
	for name, q := range limits {
		size, ok := strings.CutPrefix(string(name), corev1.ResourceHugePagesPrefix)
		if !ok {
			continue
		}
		page, err := resource.ParseQuantity(size)
		if err != nil {
			continue
		}
		n, unit := page.Value(), 0
		for n%1024 == 0 && unit < len(hugePageUnits)-1 {
			n /= 1024
			unit++
		}
		all = append(all, limit{page.Value(), &runtimeapi.HugepageLimit{
			PageSize: strconv.FormatInt(n, 10) + hugePageUnits[unit], Limit: uint64(q.Value()),
		}})
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortFunc(all, func(a, b limit) int { return cmp.Compare(a.bytes, b.bytes) })
	out := make([]*runtimeapi.HugepageLimit, len(all))
	for i, l := range all {
		out[i] = l.out
	}
	return out
}
