package admission

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/eviction"
	"github.com/jetlet/jetlet/reconcile/nodeshutdown"
)

// The reasons of a refusal, kubelet's words (a refusal for want of a
// resource is InsufficientResourcePrefix and the resource's name: OutOfcpu,
// OutOfmemory, OutOfpods, OutOfephemeral-storage, OutOfhugepages-2Mi, ...).
const (
	ReasonPodSecurity          = "PodSecurity"
	ReasonNodeName             = "NodeName"
	ReasonNodeAffinity         = "NodeAffinity"
	ReasonTaintToleration      = "TaintToleration"
	ReasonNodePorts            = "NodePorts"
	InsufficientResourcePrefix = "OutOf"
	// ReasonEvicted is the eviction manager's: the node is under pressure.
	ReasonEvicted           = eviction.Reason
	ReasonNodeUnschedulable = "NodeUnschedulable"
	// ReasonNodeShutdown is the node shutdown manager's: the host is
	// shutting down.
	ReasonNodeShutdown = nodeshutdown.NotAdmittedReason
)

// Node is what admission knows of the node at the moment of the decision.
type Node struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
	// Unschedulable is a cordoned node's (docs/contract.md section 14).
	Unschedulable bool
	// ShuttingDown: the host is shutting down (the node shutdown manager).
	ShuttingDown bool
	// Allocatable is what pods may request in all: cpu, memory,
	// ephemeral-storage, hugepages-*, pods, extended resources. A resource
	// it lacks has none to give.
	Allocatable corev1.ResourceList
	// Conditions are the pressure conditions now True (MemoryPressure,
	// DiskPressure, PIDPressure), in the order a refusal lists them.
	Conditions []corev1.NodeConditionType
	// PodSecurity is the --pod-security level; empty is baseline, the
	// flag's default.
	PodSecurity Level
}

// Verdict is admission's answer. A refused pod's status is phase Failed with
// Reason and Message (docs/contract.md section 12).
type Verdict struct {
	Admit bool
	// Reason is kubelet's word for the refusal (Reason* or OutOf<resource>).
	Reason string
	// Message says what did not fit, and by how much.
	Message string
}

var admitted = Verdict{Admit: true}

// check is one of admission's checks: admitted, or why not.
type check func(node *Node, pod *corev1.Pod, held *Held) Verdict

// checks are run in docs/contract.md section 12's order; the first refusal decides.
var checks = []check{
	checkPodSecurity,
	checkNodeName,
	checkNodeAffinity,
	checkTaints,
	checkHostPorts,
	checkResources,
	checkPodCount,
	checkNodePressure,
	checkCordon,
	checkNodeShutdown,
}

// Admit decides whether pod may start on node, given what the pods
// already admitted there and not terminal hold (held; a part of pod itself
// in it is left out).
func Admit(node *Node, pod *corev1.Pod, held *Held) Verdict {
	for _, c := range checks {
		if v := c(node, pod, held); !v.Admit {
			return v
		}
	}
	return admitted
}
