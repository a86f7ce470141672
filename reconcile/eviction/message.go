package eviction

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/schemas"
)

// Reason is an evicted pod's status reason, kubelet's.
const Reason = schemas.ReasonEvicted

// evictionMessage is kubelet's message of an eviction for want of resource,
// to the letter (each sentence ends with a space, as kubelet's do): the
// resource, the threshold and what was available when it was met, then each
// container (and a pod with a pod-level request) using more of it than it
// requested. met are the thresholds the eviction is for.
func evictionMessage(starved corev1.ResourceName, pod *corev1.Pod, usage PodUsage, measured bool, met []Threshold, signals map[Signal]Observation) string {
	message := fmt.Sprintf("The node was low on resource: %v. ", starved)
	for _, t := range met {
		observed, ok := signals[t.Signal]
		if signalResource[t.Signal] != starved || !ok {
			continue
		}
		amount := t.Value.amount(observed.Capacity)
		message += fmt.Sprintf("Threshold quantity: %v, available: %v. ", &amount, &observed.Available)
		break
	}
	if !measured {
		return message
	}
	if starved == corev1.ResourceMemory && pod.Spec.Resources != nil {
		if request, ok := pod.Spec.Resources.Requests[corev1.ResourceMemory]; ok {
			message += fmt.Sprintf("Pod %s was using %s, request is %s, has larger consumption of %v. ",
				pod.Name, bytesQuantity(usage.MemoryWorkingSet), &request, starved)
		}
	}
	// Ephemeral containers cannot request anything, so they are never named.
	specs := append(append([]corev1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
	for _, c := range usage.Containers {
		i := slices.IndexFunc(specs, func(s corev1.Container) bool { return s.Name == c.Name })
		if i < 0 {
			continue
		}
		used := containerUsage(starved, c)
		request := specs[i].Resources.Requests[starved]
		if used != nil && used.Cmp(request) > 0 {
			message += fmt.Sprintf("Container %s was using %s, request is %s, has larger consumption of %v. ",
				c.Name, used, &request, starved)
		}
	}
	return message
}

// containerUsage is what a container uses of resource, nil when unmeasured:
// its working set for memory, its writable layer and logs for
// ephemeral-storage (kubelet names a container only when both are known).
func containerUsage(starved corev1.ResourceName, c ContainerUsage) *resource.Quantity {
	switch {
	case starved == corev1.ResourceMemory && c.MemoryWorkingSet != nil:
		return bytesQuantity(*c.MemoryWorkingSet)
	case starved == corev1.ResourceEphemeralStorage && c.WritableLayer != nil && c.Logs != nil:
		return bytesQuantity(c.WritableLayer.Bytes + c.Logs.Bytes)
	}
	return nil
}

func bytesQuantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.BinarySI) }
