package client

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/schemas"
)

// allocatedOfAllocatable is get nodes' "250m/2": what the node's admitted
// pods request of a resource, out of what it can allocate; "" when the
// record says neither (a jetlet from before node status).
func allocatedOfAllocatable(r *schemas.NodeRecord, name corev1.ResourceName) string {
	allocatable, known := r.Allocatable[name]
	allocated, used := r.Allocated[name]
	if !known && !used {
		return ""
	}
	if !known {
		return allocated.String()
	}
	return allocated.String() + "/" + allocatable.String()
}

// nodePressures are the types of the node's conditions other than Ready
// that are True (MemoryPressure, DiskPressure, PIDPressure), in the
// record's order.
func nodePressures(r *schemas.NodeRecord) []string {
	var out []string
	for _, c := range r.Conditions {
		if c.Type != corev1.NodeReady && c.Status == corev1.ConditionTrue {
			out = append(out, string(c.Type))
		}
	}
	return out
}

// shareOf is kubectl describe node's "250m (12%)": q and the whole percent
// of allocatable it is (0% when the node allocates none).
func shareOf(q, allocatable resource.Quantity) string {
	percent := int64(0)
	if whole := allocatable.AsApproximateFloat64(); whole > 0 {
		percent = int64(q.AsApproximateFloat64() / whole * 100)
	}
	return fmt.Sprintf("%s (%d%%)", q.String(), percent)
}
