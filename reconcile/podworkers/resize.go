package podworkers

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/jetlet/jetlet/reconcile/admission"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// In-place resize, as kubelet's allocation manager: a new intent for an
// admitted pod may change its containers' resources. Admission decides
// whether the node takes them (admission.AdmitResize); the pod is synced
// with the resources the node took (its allocated pod), so a resize the
// node has not taken changes nothing on the node. Not taken, it is pending
// (the PodResizePending condition, reason Infeasible or Deferred); a
// deferred one is decided again whenever the node frees resources (a pod
// ends or leaves, or another resize shrinks) and at every resync. Taken,
// the sync applies it (reconcile: in place or by a restart, as the
// resizePolicy says) and the status shows PodResizeInProgress until the
// runtime reports the new resources. Events: ResizeStarted,
// ResizeDeferred, ResizeInfeasible, ResizeCompleted (ResizeError is the
// sync's).

// allocatedPod is the pod as the node admitted it: the spec a sync drives
// to and what the pod holds of the node. The caller holds p.sync or
// Workers.mu.
func (p *pod) allocatedPod() *corev1.Pod {
	if p.allocated != nil {
		return p.allocated
	}
	return p.desired.Intent.Pod
}

// syncedDesired is p's desired state with the allocated pod in its intent:
// what a sync applies. The caller holds p.sync.
func (p *pod) syncedDesired() Desired {
	d := *p.desired
	if d.Intent.Op == schemas.OpApply && p.allocated != nil && p.allocated != d.Intent.Pod {
		in := *d.Intent
		in.Pod = p.allocated
		d.Intent = &in
	}
	return d
}

// allocateLocked decides the resize the desired pod of p asks for, if any,
// and returns the events that say what was decided (to emit once w.mu is
// released). The caller holds p.sync and w.mu.
func (w *Workers) allocateLocked(p *pod) []schemas.LifecycleEvent {
	if !p.admitted || p.desired == nil || p.desired.Intent.Op != schemas.OpApply {
		return nil
	}
	want := p.desired.Intent.Pod
	if p.allocated == nil {
		p.allocated = want
		return nil
	}
	previous := withAllocation(want, p.allocated)
	if previous == want {
		// No resize: the allocation follows the rest of the spec.
		p.allocated, p.resizePending = want, nil
		return nil
	}
	v := admission.Verdict{Admit: true}
	if w.cfg.Admission != nil {
		node := w.cfg.Admission()
		v = admission.AdmitResize(&node, want, w.held)
		if v.Admit {
			if q := w.resizeBefore(p, &node); q != nil {
				// A deferred resize that goes first in kubelet's order fits
				// now: it takes the room, then p is decided again.
				p.allocated, p.resizeYielded = previous, true
				w.wakeLocked(q)
				return nil
			}
		}
	}
	p.resizeYielded = false
	if !v.Admit {
		// Those that gave way to p decide again: p took nothing.
		w.wakeYieldedLocked()
		p.allocated = previous
		if c := p.resizePending; c != nil && c.Reason == v.Reason && c.Message == v.Message {
			return nil // decided so before: said already
		}
		p.resizePending = &schemas.PodCondition{Type: schemas.PodResizePending, Status: schemas.ConditionTrue,
			Reason: v.Reason, Message: v.Message, LastTransitionTime: time.Now().UTC()}
		typ := schemas.EventResizeDeferred
		if v.Reason == admission.ReasonResizeInfeasible {
			typ = schemas.EventResizeInfeasible
		}
		return []schemas.LifecycleEvent{w.resizeEvent(p, typ, v.Reason, resizeMessage("Pod resize "+v.Reason, want, v.Message))}
	}
	shrinks, _ := requestsChange(previous, want)
	p.allocated, p.resizePending, p.resizing = want, nil, true
	w.allocationChanged()
	if shrinks {
		w.wakeDeferredLocked()
	}
	w.wakeYieldedLocked()
	return []schemas.LifecycleEvent{w.resizeEvent(p, schemas.EventResizeStarted, "", resizeMessage("Pod resize started", want, ""))}
}

// checkpointAllocation records p's allocation when its containers'
// resources changed; a failure is said and tried again at the next sync.
// Every intent is a new pod value, so the allocation is compared by what
// the record holds: a no-op intent writes nothing (two fsyncs per sync
// otherwise). The caller holds p.sync.
func (w *Workers) checkpointAllocation(p *pod) {
	if p.allocated == nil || p.allocated == p.checkpointed {
		return
	}
	if p.checkpointed != nil && sameAllocation(p.allocated, p.checkpointed) {
		p.checkpointed = p.allocated
		return
	}
	if err := w.cfg.Allocations.StoreAllocation(p.allocated); err != nil {
		w.log.Warn().Err(err).Str("uid", p.uid).Msg("the pod's allocation is not recorded: a restarted jetlet would take its newest intent for it")
		return
	}
	p.checkpointed = p.allocated
}

// sameAllocation reports whether a and b give their containers, by name,
// and the pod the same resources: what StoreAllocation records of either is
// the same.
func sameAllocation(a, b *corev1.Pod) bool {
	same := func(x, y []corev1.Container) bool {
		return slices.EqualFunc(x, y, func(c, d corev1.Container) bool {
			return c.Name == d.Name && admission.SameResources(c.Resources, d.Resources)
		})
	}
	return same(a.Spec.InitContainers, b.Spec.InitContainers) && same(a.Spec.Containers, b.Spec.Containers) &&
		samePodResources(a, b)
}

// samePodResources reports whether a and b have the same pod-level
// resources (none and empty alike).
func samePodResources(a, b *corev1.Pod) bool {
	return admission.SameResources(podResources(a), podResources(b))
}

// podResources are pod's pod-level resources; empty when it has none.
func podResources(pod *corev1.Pod) corev1.ResourceRequirements {
	if pod.Spec.Resources == nil {
		return corev1.ResourceRequirements{}
	}
	return *pod.Spec.Resources
}

// loadAllocations reads the recorded allocations of the running pods, by
// uid. One that cannot be read is said and left out: the pod's newest
// intent is taken for it, as with no record.
func (w *Workers) loadAllocations(running []*kubecontainer.RuntimePod) map[string]map[string]corev1.ResourceRequirements {
	out := map[string]map[string]corev1.ResourceRequirements{}
	for _, rp := range running {
		alloc, err := w.cfg.Allocations.LoadAllocation(rp.UID)
		if err != nil {
			w.log.Warn().Err(err).Str("uid", rp.UID).Msg("the pod's recorded allocation cannot be read: its newest intent is taken for it")
			continue
		}
		if alloc != nil {
			out[rp.UID] = alloc
		}
	}
	return out
}

// withResources is pod with the resources alloc has for its containers,
// by name, and for the pod (kubecontainer.AllocationPodLevel); pod itself
// when alloc changes none.
func withResources(pod *corev1.Pod, alloc map[string]corev1.ResourceRequirements) *corev1.Pod {
	allocated := pod.DeepCopy()
	if r, ok := alloc[kubecontainer.AllocationPodLevel]; ok {
		allocated.Spec.Resources = r.DeepCopy()
	}
	for _, cs := range [][]corev1.Container{allocated.Spec.InitContainers, allocated.Spec.Containers} {
		for i := range cs {
			if r, ok := alloc[cs[i].Name]; ok {
				cs[i].Resources = r
			}
		}
	}
	return withAllocation(pod, allocated)
}

// resizeCompleted is the ResizeCompleted event of p's resize once the
// runtime applied it (st, after a sync, shows no resize in progress). The
// caller holds p.sync.
func (w *Workers) resizeCompleted(p *pod, st *schemas.PodStatus) []schemas.LifecycleEvent {
	if !p.resizing || st == nil || slices.ContainsFunc(st.Conditions, func(c schemas.PodCondition) bool { return c.Type == schemas.PodResizeInProgress }) {
		return nil
	}
	p.resizing = false
	return []schemas.LifecycleEvent{w.resizeEvent(p, schemas.EventResizeCompleted, "", resizeMessage("Pod resize completed", p.allocatedPod(), ""))}
}

// resizeBefore is a pod whose deferred resize goes before p's in kubelet's
// order (resizeOrder) and that the node can take now; nil when there is
// none. The caller holds w.mu.
func (w *Workers) resizeBefore(p *pod, node *admission.Node) *pod {
	for _, q := range w.pods {
		if q != p && q.resizePending != nil && q.resizePending.Reason == admission.ReasonResizeDeferred &&
			q.desired.Intent.Op == schemas.OpApply && // a pod being deleted resizes no more
			resizeOrder(q, p) < 0 && admission.AdmitResize(node, q.desired.Intent.Pod, w.held).Admit {
			return q
		}
	}
	return nil
}

// resizeOrder is kubelet's order of pending resizes (its allocation
// manager's sortPendingResizes): first those that raise no request (they
// always fit), then the higher priority, then a Guaranteed pod before the
// others, then the resize deferred longest (one never deferred last). The
// caller holds w.mu.
func resizeOrder(a, b *pod) int {
	x, y := rankOf(a), rankOf(b)
	return cmp.Or(cmp.Compare(x.raises, y.raises), cmp.Compare(y.priority, x.priority),
		cmp.Compare(x.notGuaranteed, y.notGuaranteed), cmp.Compare(x.neverDeferred, y.neverDeferred),
		x.deferredAt.Compare(y.deferredAt))
}

// resizeRank is what resizeOrder compares of a pod's pending resize; the
// 0/1 parts go lower first.
type resizeRank struct {
	raises, notGuaranteed, neverDeferred int
	priority                             int32
	deferredAt                           time.Time
}

func rankOf(p *pod) resizeRank {
	want := p.desired.Intent.Pod
	r := resizeRank{priority: corev1helpers.PodPriority(want), neverDeferred: 1}
	if _, raises := requestsChange(p.allocatedPod(), want); raises {
		r.raises = 1
	}
	if admission.PodQOS(want) != corev1.PodQOSGuaranteed {
		r.notGuaranteed = 1
	}
	if c := p.resizePending; c != nil {
		r.neverDeferred, r.deferredAt = 0, c.LastTransitionTime
	}
	return r
}

// wakeYieldedLocked wakes the pods whose resize gave way to another's
// (resizeBefore), once that one is decided. The caller holds w.mu.
func (w *Workers) wakeYieldedLocked() {
	for _, o := range w.pods {
		if o.resizeYielded {
			w.wakeLocked(o)
		}
	}
}

// wakeDeferredLocked wakes the pods whose resize is deferred: the node freed
// resources. The caller holds w.mu.
func (w *Workers) wakeDeferredLocked() {
	for _, o := range w.pods {
		if o.resizePending != nil && o.resizePending.Reason == admission.ReasonResizeDeferred {
			w.wakeLocked(o)
		}
	}
}

// wakeDeferred is wakeDeferredLocked without w.mu held.
func (w *Workers) wakeDeferred() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.wakeDeferredLocked()
}

// resizeEvent is one of the resize events of p's desired intent: its id
// names the pod, the intent and the type, so a decision said again (a
// deferred resize decided at every retry, or again after a restart of
// jetlet) is stored once.
func (w *Workers) resizeEvent(p *pod, typ schemas.EventType, reason, message string) schemas.LifecycleEvent {
	pod := p.desired.Intent.Pod
	ev := kubecontainer.NewEvent(w.cfg.Node, kubecontainer.PodRef{UID: p.uid, Namespace: pod.Namespace, Name: pod.Name}, typ,
		kubecontainer.EventID(p.uid+"."+strconv.FormatUint(p.desired.IntentSeq, 10), typ), time.Now().UTC())
	ev.Reason, ev.Message = reason, message
	return ev
}

// emitAll emits evs in the context of p's desired intent.
func (w *Workers) emitAll(ctx context.Context, p *pod, evs []schemas.LifecycleEvent) {
	for _, ev := range evs {
		w.emit.Emit(withIntent(ctx, *p.desired), ev)
	}
}

// withAllocation is want with each container's resources, and the pod's,
// as allocated has them (a container allocated has none of is taken as it
// is); want itself when they are all the same.
func withAllocation(want, allocated *corev1.Pod) *corev1.Pod {
	var out *corev1.Pod
	if !samePodResources(want, allocated) {
		out = want.DeepCopy()
		out.Spec.Resources = allocated.Spec.Resources.DeepCopy()
	}
	for _, kind := range []func(*corev1.Pod) []corev1.Container{
		func(p *corev1.Pod) []corev1.Container { return p.Spec.InitContainers },
		func(p *corev1.Pod) []corev1.Container { return p.Spec.Containers },
	} {
		for i, c := range kind(want) {
			j := slices.IndexFunc(kind(allocated), func(a corev1.Container) bool { return a.Name == c.Name })
			if j < 0 || admission.SameResources(c.Resources, kind(allocated)[j].Resources) {
				continue
			}
			if out == nil {
				out = want.DeepCopy()
			}
			kind(out)[i].Resources = *kind(allocated)[j].Resources.DeepCopy()
		}
	}
	if out == nil {
		return want
	}
	return out
}

// requestsChange reports whether some memory or cpu request of the pod goes
// down from was to is (the node has more to give), and whether some goes up.
func requestsChange(was, is *corev1.Pod) (down, up bool) {
	a, b := admission.Allocated([]*corev1.Pod{was}), admission.Allocated([]*corev1.Pod{is})
	mem, cpu := b.Memory().Cmp(*a.Memory()), b.Cpu().Cmp(*a.Cpu())
	return mem < 0 || cpu < 0, mem > 0 || cpu > 0
}

// resizeMessage is kubelet's resize event message: what, then the pod's
// resources (pod-level, where set) and each container's (and the why, when
// pending).
func resizeMessage(what string, pod *corev1.Pod, why string) string {
	type container struct {
		Name      string                      `json:"name"`
		Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	}
	var summary struct {
		Resources      *corev1.ResourceRequirements `json:"resources,omitempty"`
		InitContainers []container                  `json:"initContainers,omitempty"`
		Containers     []container                  `json:"containers,omitempty"`
		Error          string                       `json:"error,omitempty"`
	}
	for _, c := range pod.Spec.InitContainers {
		if kubecontainer.IsSidecar(&c) {
			summary.InitContainers = append(summary.InitContainers, container{c.Name, c.Resources})
		}
	}
	for _, c := range pod.Spec.Containers {
		summary.Containers = append(summary.Containers, container{c.Name, c.Resources})
	}
	summary.Resources, summary.Error = pod.Spec.Resources, why
	b, _ := json.Marshal(summary) // always marshals
	return what + ": " + string(b)
}
