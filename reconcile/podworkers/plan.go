package podworkers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/admission"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/nodestatus"
	"github.com/jetlet/jetlet/schemas"
)

// Plan is the node's verdict on intent for pod uid, as its sync would give
// it now, without acting (docs/contract.md section 14): admission's verdict on a
// pod it does not run yet (nothing else when refused), then what the sync
// would do to the pod as the runtime has it. A delete plans the pod's end.
// It takes no sync lock: a sync running meanwhile may change what is true.
func (w *Workers) Plan(ctx context.Context, uid string, intent *schemas.PodIntent) (schemas.PodPlan, error) {
	plan := schemas.PodPlan{Node: w.cfg.Node, UID: uid, Op: intent.Op}
	w.mu.Lock()
	var previous, allocated *corev1.Pod // the pod the node applied last, and as it allocated it
	admitted := false
	if p := w.pods[uid]; p != nil {
		admitted = p.admitted
		if p.desired != nil && p.desired.Intent.Op == schemas.OpApply {
			previous, allocated = p.desired.Intent.Pod, p.allocatedPod()
		}
	}
	pod := intent.Pod
	switch {
	case intent.Op == schemas.OpDelete:
		pod = previous
	case !admitted:
		v := w.admitLocked(pod)
		plan.Admission = &schemas.PlanAdmission{Admit: v.Admit, Reason: v.Reason, Message: v.Message}
	case allocated != nil && w.cfg.Admission != nil && withAllocation(pod, allocated) != pod:
		// A resize: admission's verdict on it, as the sync would decide it.
		node := w.cfg.Admission()
		if v := admission.AdmitResize(&node, pod, w.held); !v.Admit {
			plan.Admission = &schemas.PlanAdmission{Reason: v.Reason, Message: "resize pending: " + v.Message}
		}
	}
	w.mu.Unlock()
	if pod != nil {
		plan.Namespace, plan.Name = pod.Namespace, pod.Name
	}
	if intent.Op == schemas.OpApply {
		missing, err := nodestatus.MissingFeatures(pod, previous, w.cfg.DeclaredFeatures)
		if err != nil {
			return plan, err
		}
		plan.MissingFeatures = missing
	}
	if pod == nil || (plan.Admission != nil && !plan.Admission.Admit) {
		return plan, nil // nothing to delete, or nothing may start
	}
	// As new as a sync's status: the cache may be a relist behind.
	status, err := w.cache.Status(ctx, uid, time.Now())
	if err != nil {
		return plan, err
	}
	if status == nil {
		status = &kubecontainer.PodStatus{UID: uid, Name: pod.Name, Namespace: pod.Namespace}
	}
	if intent.Op == schemas.OpDelete {
		return w.deletePlan(plan, pod, status), nil
	}
	if api := w.mgr.ToAPIStatus(pod, status); isTerminal(api.Phase) && !sandboxReady(status) {
		plan.Finished = true
		return plan, nil
	}
	pp := w.mgr.PlanPod(pod, status, previous)
	plan.Sandbox, plan.Containers = pp.Sandbox, pp.Containers
	return plan, nil
}

// deletePlan is the end of a pod: every running container killed, the
// sandbox with them.
func (w *Workers) deletePlan(plan schemas.PodPlan, pod *corev1.Pod, status *kubecontainer.PodStatus) schemas.PodPlan {
	const why = "pod deleted"
	plan.Sandbox = schemas.PlanStep{Action: schemas.PlanNone}
	if sandboxReady(status) {
		plan.Sandbox = schemas.PlanStep{Action: schemas.PlanKill, Message: why}
	}
	for _, list := range []struct {
		init bool
		cs   []corev1.Container
	}{{true, pod.Spec.InitContainers}, {false, pod.Spec.Containers}} {
		for _, c := range list.cs {
			step := schemas.PlanStep{Name: c.Name, Init: list.init, Action: schemas.PlanNone}
			if cs := status.FindContainerStatusByName(c.Name); cs != nil && cs.State == kubecontainer.ContainerRunning {
				step.Action, step.Reason, step.Message = schemas.PlanKill, schemas.ReasonPodDeleted, why
			}
			plan.Containers = append(plan.Containers, step)
		}
	}
	return plan
}
