package admission

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// podRequests is what a pod holds of the node while it is active, kubelet's
// and the scheduler's pod requests (component-helpers' PodRequests): the sum
// of its containers' and sidecars' requests, or the largest an init
// container needs beside the sidecars started before it if that is more, per
// resource; the pod-level requests where they are set; plus the pod overhead.
func podRequests(pod *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// Allocated is what the active pods hold: the sum of their requests
// (podRequests), and their count as "pods". It is the node record's
// allocated.
func Allocated(active []*corev1.Pod) corev1.ResourceList {
	allocated := corev1.ResourceList{
		corev1.ResourcePods: *resource.NewQuantity(int64(len(active)), resource.DecimalSI),
	}
	// One scratch list for every pod's requests, folded into the sum at once.
	var scratch corev1.ResourceList
	for _, pod := range active {
		scratch = resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{Reuse: scratch})
		for name, q := range scratch {
			sum := allocated[name]
			sum.Add(q)
			allocated[name] = sum
		}
	}
	return allocated
}

// checkResources refuses a pod whose requests do not fit in what the node
// can allocate less what the active pods hold, for each resource it requests
// (a resource the node lacks has a capacity of 0), in the scheduler's order:
// cpu, memory, ephemeral-storage, then the others by name. kubelet admits
// requests of extended resources the node lacks (they may be the cluster's,
// or DRA's); a jetlet node has neither, so it refuses them and says which.
func checkResources(node *Node, pod *corev1.Pod, held *Held) Verdict {
	requests := podRequests(pod)
	var used corev1.ResourceList
	for _, name := range requestOrder(requests) {
		requested := amount(name, requests[name])
		if requested <= 0 {
			continue
		}
		if used == nil {
			used = held.usedBesides(pod.UID)
		}
		inUse, capacity := amount(name, used[name]), amount(name, node.Allocatable[name])
		if requested > capacity-inUse {
			return insufficient(name, requested, inUse, capacity)
		}
	}
	return admitted
}

// checkPodCount refuses a pod beyond the node's allocatable pods (--max-pods).
func checkPodCount(node *Node, pod *corev1.Pod, held *Held) Verdict {
	capacity := amount(corev1.ResourcePods, node.Allocatable[corev1.ResourcePods])
	if active := held.podsBesides(pod.UID); active+1 > capacity {
		return insufficient(corev1.ResourcePods, 1, active, capacity)
	}
	return admitted
}

// insufficient is kubelet's refusal for want of a resource: reason OutOfcpu,
// OutOfmemory, ..., and its InsufficientResourceError's message.
func insufficient(name corev1.ResourceName, requested, used, capacity int64) Verdict {
	return Verdict{
		Reason: InsufficientResourcePrefix + string(name),
		Message: fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
			name, requested, used, capacity),
	}
}

// requestOrder is the scheduler's: cpu, memory, ephemeral-storage first, then
// the other requested resources by name. Pods are counted, not requested.
func requestOrder(requests corev1.ResourceList) []corev1.ResourceName {
	first := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage}
	order := make([]corev1.ResourceName, 0, len(requests))
	for _, name := range first {
		if _, ok := requests[name]; ok {
			order = append(order, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(requests)) {
		if !slices.Contains(first, name) && name != corev1.ResourcePods {
			order = append(order, name)
		}
	}
	return order
}

// amount is a quantity as the scheduler counts it: cpu in millicores, the
// rest in units (bytes, pages' bytes, devices).
func amount(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

// Reasons of a resize admission does not take now, kubelet's (the
// PodResizePending condition's).
const (
	ReasonResizeInfeasible = "Infeasible"
	ReasonResizeDeferred   = "Deferred"
)

// resizable are the resources an in-place resize changes.
var resizable = []corev1.ResourceName{corev1.ResourceMemory, corev1.ResourceCPU}

// AdmitResize decides whether the node takes pod's new requests, pod being
// admitted before, beside what the other active pods hold (held, where pod
// may hold its allocation: it is left out), as kubelet's canResizePod:
// Infeasible when the pod's memory or cpu requests exceed what the node can
// allocate at all (it never fits here), Deferred when they exceed what the
// others leave (retried when resources free), with kubelet's messages.
func AdmitResize(node *Node, pod *corev1.Pod, held *Held) Verdict {
	requests := podRequests(pod)
	for _, name := range resizable {
		if requested, capacity := amount(name, requests[name]), amount(name, node.Allocatable[name]); requested > capacity {
			return Verdict{Reason: ReasonResizeInfeasible, Message: fmt.Sprintf(
				"Node didn't have enough capacity: %s, requested: %d, capacity: %d", name, requested, capacity)}
		}
	}
	if v := checkResources(node, pod, held); !v.Admit {
		v.Reason = ReasonResizeDeferred
		return v
	}
	return admitted
}
