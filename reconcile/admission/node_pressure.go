package admission

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// systemCriticalPriority is the priority from which kubelet counts a pod
// critical (scheduling.SystemCriticalPriority, system-cluster-critical's).
const systemCriticalPriority = 2_000_000_000

// checkNodePressure is kubelet's eviction manager Admit: a node under no
// pressure admits every pod; under pressure it admits critical pods, and under
// memory pressure alone the pods that are not BestEffort or that tolerate the
// memory-pressure taint; it refuses the rest, naming every condition.
func checkNodePressure(node *Node, pod *corev1.Pod, _ []*corev1.Pod) Verdict {
	if len(node.Conditions) == 0 || isCriticalPod(pod) {
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
		// kubelet's nodeConditionMessageFmt, without its trailing space.
		Message: fmt.Sprintf("The node had condition: %v.", node.Conditions),
	}
}

// isCriticalPod is kubelet's IsCriticalPod for a pod that is neither static
// nor mirror (jetlet has neither): its priority is system-critical.
func isCriticalPod(pod *corev1.Pod) bool {
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}
