package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/eviction"
)

// checkNodePressure is kubelet's eviction manager Admit: a node under no
// pressure admits every pod; under pressure it admits critical pods, and under
// memory pressure alone the pods that are not BestEffort or that tolerate the
// memory-pressure taint; it refuses the rest, naming every condition.
func checkNodePressure(node *Node, pod *corev1.Pod, _ *Held) Verdict {
	if len(node.Conditions) == 0 || eviction.IsCritical(pod) {
		return admitted
	}
	if len(node.Conditions) == 1 && node.Conditions[0] == corev1.NodeMemoryPressure {
		if PodQOS(pod) != corev1.PodQOSBestEffort ||
			tolerates(pod, corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule) {
			return admitted
		}
	}
	return Verdict{
		Reason: ReasonEvicted,
		// kubelet's nodeConditionMessageFmt to the letter, trailing space
		// and all, as eviction's messages are.
		Message: fmt.Sprintf("The node had condition: %v. ", node.Conditions),
	}
}
