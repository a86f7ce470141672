package admission

import (
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// tolerationComparisonOperators is the TaintTolerationComparisonOperators
// feature gate (tolerations with Gt and Lt), alpha and off in Kubernetes 1.37:
// such a toleration tolerates nothing.
const tolerationComparisonOperators = false

// checkTaints refuses a pod that does not tolerate one of the node's
// NoSchedule or NoExecute taints. kubelet checks only NoExecute, leaving
// NoSchedule to the scheduler; with no scheduler of its own in front of it,
// the node checks both, as the scheduler's TaintToleration filter would.
func checkTaints(node *Node, pod *corev1.Pod, _ *Held) Verdict {
	taint, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), node.Taints, pod.Spec.Tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, tolerationComparisonOperators)
	if !untolerated {
		return admitted
	}
	return Verdict{
		Reason:  ReasonTaintToleration,
		Message: "Predicate TaintToleration failed: node(s) had untolerated taint " + taint.ToString(),
	}
}

// checkCordon refuses a new pod on a cordoned node unless it tolerates
// node.kubernetes.io/unschedulable:NoSchedule, as the scheduler's
// NodeUnschedulable filter does (DaemonSet pods do).
func checkCordon(node *Node, pod *corev1.Pod, _ *Held) Verdict {
	if !node.Unschedulable || tolerates(pod, corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule) {
		return admitted
	}
	return Verdict{
		Reason: ReasonNodeUnschedulable,
		Message: fmt.Sprintf("Predicate NodeUnschedulable failed: node(s) were unschedulable: node %s is cordoned "+
			"and the pod does not tolerate %s:%s", node.Name, corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule),
	}
}

// tolerates says whether the pod tolerates the taint key (no value) with effect.
func tolerates(pod *corev1.Pod, key string, effect corev1.TaintEffect) bool {
	return corev1helpers.TolerationsTolerateTaint(logr.Discard(), pod.Spec.Tolerations,
		&corev1.Taint{Key: key, Effect: effect}, tolerationComparisonOperators)
}
