package podworkers

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetlet/jetlet/reconcile/admission"
	"github.com/jetlet/jetlet/schemas"
)

// Admission, as kubelet's HandlePodAdditions: a pod the node does not run
// yet is admitted before its first sync, against the node as it is and the
// pods admitted before it, all under Workers.mu, so that two pods racing for
// the last of a resource get one yes and one no. A refused pod is never
// started: its status is Failed with kubelet's reason, and it holds nothing.
// An update of an admitted pod is not admitted again, but a change of its
// containers' resources is a resize, which admission decides (resize.go);
// nor is a pod the runtime already runs when jetlet starts admitted again.

// admitLocked decides whether pod may start now; the caller holds w.mu.
func (w *Workers) admitLocked(pod *corev1.Pod) admission.Verdict {
	if w.cfg.Admission == nil {
		return admission.Verdict{Admit: true}
	}
	node := w.cfg.Admission()
	return admission.Admit(&node, pod, w.held)
}

// active reports whether p holds the node's resources: admitted and not
// terminal (a pod being deleted holds them until it is gone). The caller
// holds w.mu.
func (p *pod) active() bool {
	return p.admitted && p.desired != nil && p.desired.Intent.Pod != nil &&
		(p.lastStatus == nil || !isTerminal(p.lastStatus.Phase))
}

// holdLocked brings w.held in step with p, after a change of what p.active
// reads or of p's allocation: what admission decides against is kept as
// pods change, not summed anew for each decision. A pod no longer in
// w.pods was unset as it left, and its UID may be another's now. The caller
// holds w.mu.
func (w *Workers) holdLocked(p *pod) {
	switch {
	case w.pods[p.uid] != p:
	case p.active():
		w.held.Set(p.allocatedPod())
	default:
		w.held.Unset(types.UID(p.uid))
	}
}

// activeLocked is the active pods, with what they were allocated. The
// caller holds w.mu.
func (w *Workers) activeLocked() []*corev1.Pod {
	var active []*corev1.Pod
	for _, p := range w.pods {
		if p.active() {
			active = append(active, p.allocatedPod())
		}
	}
	return active
}

// Allocated is what the admitted, non-terminal pods request, and their
// count as pods: the node record's allocated.
func (w *Workers) Allocated() corev1.ResourceList {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held.Allocated()
}

// ActivePods is the admitted pods that are not terminal, for the eviction
// manager's ranking.
func (w *Workers) ActivePods() []*corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.activeLocked()
}

// admitRecoveredLocked admits, at Start, the desired pods the runtime does
// not run, oldest intent first, after the pods it runs (admitted as they
// are); it returns those refused with their statuses, to store once w.mu is
// released. The caller holds w.mu.
func (w *Workers) admitRecoveredLocked(running map[string]bool) []refusal {
	for uid := range running {
		if p, ok := w.pods[uid]; ok {
			p.admitted = true
			w.holdLocked(p)
		}
	}
	var waiting []*pod
	for uid, p := range w.pods {
		if !running[uid] && p.desired != nil && p.desired.Intent.Op == schemas.OpApply {
			waiting = append(waiting, p)
		}
	}
	slices.SortFunc(waiting, func(a, b *pod) int { return cmp.Compare(a.desired.IntentSeq, b.desired.IntentSeq) })
	var refused []refusal
	for _, p := range waiting {
		if v := w.admitLocked(p.desired.Intent.Pod); !v.Admit {
			refused = append(refused, refusal{p, refusedStatus(w.cfg.Node, *p.desired, v)})
			p.desired = nil
			continue
		}
		p.admitted = true
		w.holdLocked(p)
	}
	return refused
}

// refusal is a pod admission refused and the status that says so.
type refusal struct {
	p      *pod
	status *schemas.PodStatus
}

// refusedStatus is the status of a pod admission refused: Failed, with
// kubelet's reason and message, nothing of it on the node.
func refusedStatus(node string, want Desired, v admission.Verdict) *schemas.PodStatus {
	pod := want.Intent.Pod
	return &schemas.PodStatus{
		UID: want.UID, Namespace: pod.Namespace, Name: pod.Name, Node: node,
		Revision: want.Intent.Revision, IntentSeq: want.IntentSeq,
		Phase: schemas.PhaseFailed, Reason: v.Reason, Message: v.Message,
		InitContainers: []schemas.ContainerStatus{}, Containers: []schemas.ContainerStatus{},
		ObservedAt: time.Now().UTC(),
	}
}
