package admission

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// Held is what the active pods hold of the node: their count, their
// requests summed (podRequests) and their host ports. Its owner keeps it
// as pods become active and stop being so (Set, Unset), so that a decision
// costs the same beside ten pods or ten thousand: kubelet sums every active
// pod's requests for each admission, which under the pod workers' lock made
// each new pod wait for a walk of all the others. The verdicts are
// kubelet's. Not safe for concurrent use: its owner guards it.
type Held struct {
	parts    map[types.UID]heldPart
	requests corev1.ResourceList // the parts' requests summed
	// requesters counts, per resource in requests, the parts that request
	// it (zero included), so that a resource leaves the sum with the last
	// of them, as Allocated of the pods left would not name it.
	requesters map[corev1.ResourceName]int
	// ports are the parts' host ports by protocol and port, each with the
	// pod that holds it: a wanted port is checked against these alone.
	ports map[portKey][]portHolder
}

// heldPart is one active pod's part of Held.
type heldPart struct {
	pod       *corev1.Pod // as Set was given it
	requests  corev1.ResourceList
	hostPorts []hostPort
}

type portKey struct {
	protocol corev1.Protocol
	port     int32
}

type portHolder struct {
	port hostPort
	uid  types.UID
}

// NewHeld is what active hold.
func NewHeld(active ...*corev1.Pod) *Held {
	h := &Held{parts: map[types.UID]heldPart{}, requests: corev1.ResourceList{},
		requesters: map[corev1.ResourceName]int{}, ports: map[portKey][]portHolder{}}
	for _, pod := range active {
		h.Set(pod)
	}
	return h
}

// Set makes pod (by its UID) one of the active pods, holding what it
// requests now; the part it held before, if any, is given back first. The
// same pod set again changes nothing.
func (h *Held) Set(pod *corev1.Pod) {
	if part, ok := h.parts[pod.UID]; ok {
		if part.pod == pod {
			return
		}
		if HoldsTheSame(part.pod, pod) {
			// A new intent that changes nothing admission counts (a
			// no-op's, every one a new pod value): nothing to sum again.
			part.pod = pod
			h.parts[pod.UID] = part
			return
		}
		h.Unset(pod.UID)
	}
	part := heldPart{pod: pod, requests: podRequests(pod), hostPorts: hostPorts(pod)}
	for name, q := range part.requests {
		sum := h.requests[name]
		sum.Add(q)
		h.requests[name] = sum
		h.requesters[name]++
	}
	for _, p := range part.hostPorts {
		k := portKey{p.protocol, p.port}
		h.ports[k] = append(h.ports[k], portHolder{p, pod.UID})
	}
	h.parts[pod.UID] = part
}

// Unset gives back what pod uid held: it is no longer active.
func (h *Held) Unset(uid types.UID) {
	part, ok := h.parts[uid]
	if !ok {
		return
	}
	for name, q := range part.requests {
		if h.requesters[name]--; h.requesters[name] == 0 {
			delete(h.requesters, name)
			delete(h.requests, name)
			continue
		}
		sum := h.requests[name]
		sum.Sub(q)
		h.requests[name] = sum
	}
	for _, p := range part.hostPorts {
		k := portKey{p.protocol, p.port}
		h.ports[k] = slices.DeleteFunc(h.ports[k], func(o portHolder) bool { return o.uid == uid })
		if len(h.ports[k]) == 0 {
			delete(h.ports, k)
		}
	}
	delete(h.parts, uid)
}

// podsBesides is how many pods other than uid are active.
func (h *Held) podsBesides(uid types.UID) int64 {
	if _, ok := h.parts[uid]; ok {
		return int64(len(h.parts) - 1)
	}
	return int64(len(h.parts))
}

// Allocated is what the active pods hold, with their count as "pods": the
// node record's allocated, what Allocated of the same pods says.
func (h *Held) Allocated() corev1.ResourceList {
	allocated := h.requests.DeepCopy()
	allocated[corev1.ResourcePods] = *resource.NewQuantity(int64(len(h.parts)), resource.DecimalSI)
	return allocated
}

// usedBesides is what the active pods other than uid hold.
func (h *Held) usedBesides(uid types.UID) corev1.ResourceList {
	part, ok := h.parts[uid]
	if !ok {
		return h.requests
	}
	used := h.requests.DeepCopy()
	for name, q := range part.requests {
		sum := used[name]
		sum.Sub(q)
		used[name] = sum
	}
	return used
}

// HoldsTheSame reports whether a and b request the same and bind the same
// host ports: their containers' and sidecars' resources and ports, and the
// pod's own resources and overhead.
func HoldsTheSame(a, b *corev1.Pod) bool {
	same := func(x, y []corev1.Container) bool {
		return slices.EqualFunc(x, y, func(c, d corev1.Container) bool {
			return c.Name == d.Name && SameResources(c.Resources, d.Resources) && slices.Equal(c.Ports, d.Ports) &&
				(c.RestartPolicy == nil) == (d.RestartPolicy == nil) && (c.RestartPolicy == nil || *c.RestartPolicy == *d.RestartPolicy)
		})
	}
	samePodResources := (a.Spec.Resources == nil) == (b.Spec.Resources == nil) &&
		(a.Spec.Resources == nil || SameResources(*a.Spec.Resources, *b.Spec.Resources))
	return same(a.Spec.InitContainers, b.Spec.InitContainers) && same(a.Spec.Containers, b.Spec.Containers) &&
		samePodResources && sameList(a.Spec.Overhead, b.Spec.Overhead)
}

// SameResources is equality.Semantic.DeepEqual of two resource
// requirements (quantities equal by value, a nil list an empty one)
// without its reflection, for what runs at every sync.
func SameResources(a, b corev1.ResourceRequirements) bool {
	return sameList(a.Limits, b.Limits) && sameList(a.Requests, b.Requests) && slices.Equal(a.Claims, b.Claims)
}

func sameList(a, b corev1.ResourceList) bool {
	return maps.EqualFunc(a, b, func(p, q resource.Quantity) bool { return p.Cmp(q) == 0 })
}
