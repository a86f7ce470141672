package nodestatus

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Allocatable is what pods may be given, as kubelet computes it: each
// resource of capacity less what each of reserved sets aside for it
// (--kube-reserved, --system-reserved, the hard eviction thresholds), never
// below zero; memory is also less the memory huge pages take, which no pod
// can use as ordinary memory.
func Allocatable(capacity corev1.ResourceList, reserved ...corev1.ResourceList) corev1.ResourceList {
	allocatable := corev1.ResourceList{}
	for name, c := range capacity {
		value := c.DeepCopy()
		for _, r := range reserved {
			if q, ok := r[name]; ok {
				value.Sub(q)
			}
		}
		allocatable[name] = nonNegative(value)
	}
	for name, pages := range capacity {
		if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			memory := allocatable[corev1.ResourceMemory]
			memory.Sub(pages)
			allocatable[corev1.ResourceMemory] = nonNegative(memory)
		}
	}
	return allocatable
}

func nonNegative(q resource.Quantity) resource.Quantity {
	if q.Sign() < 0 {
		return *resource.NewQuantity(0, q.Format)
	}
	return q
}
