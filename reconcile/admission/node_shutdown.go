package admission

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/nodeshutdown"
)

// checkNodeShutdown refuses every new pod while the host shuts down, as
// kubelet's node shutdown manager's Admit.
func checkNodeShutdown(node *Node, _ *corev1.Pod, _ *Held) Verdict {
	if !node.ShuttingDown {
		return admitted
	}
	return Verdict{Reason: ReasonNodeShutdown, Message: nodeshutdown.NotAdmittedMessage}
}
