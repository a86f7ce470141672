package schemas

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// EndpointStats answers with the node's usage in kubelet's Summary API
// shape (k8s.io/kubelet/pkg/apis/stats/v1alpha1.Summary, what kubelet
// serves at /stats/summary); the request's body is empty.
const EndpointStats = "stats"

// ResourceUsage is usage as metrics-server reports it to kubectl top: cpu
// from the rate in nanocores, memory the working set. A figure the stats
// lack (no rate yet) is left out.
func ResourceUsage(cpu *statsapi.CPUStats, memory *statsapi.MemoryStats) corev1.ResourceList {
	out := corev1.ResourceList{}
	if cpu != nil && cpu.UsageNanoCores != nil {
		out[corev1.ResourceCPU] = *resource.NewScaledQuantity(int64(*cpu.UsageNanoCores), resource.Nano)
	}
	if memory != nil && memory.WorkingSetBytes != nil {
		out[corev1.ResourceMemory] = *resource.NewQuantity(int64(*memory.WorkingSetBytes), resource.BinarySI)
	}
	return out
}
