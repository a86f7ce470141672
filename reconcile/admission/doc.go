// Package admission decides whether a new pod may start on this node, as
// kubelet's pod admit handlers do (pkg/kubelet/lifecycle/predicate.go and the
// eviction manager's Admit), with the Pod Security Standards checked at the
// node as the API server checks them.
//
// Admit is a pure function of what the node is (Node), the pod, and what the
// pods already admitted and not terminal hold (Held, which their owner keeps
// as they come, change and go, so that a decision does not walk them). It runs the checks of docs/contract.md section 12
// in order; the first that fails decides, with kubelet's reason and a message
// that says what did not fit:
//
//  1. pod security at the node's level       PodSecurity
//  2. spec.nodeName                          NodeName
//  3. nodeSelector, required node affinity   NodeAffinity
//  4. NoSchedule and NoExecute taints        TaintToleration
//  5. host ports already in use              NodePorts
//  6. requests against allocatable − allocated  OutOfcpu, OutOfmemory, OutOf<resource>
//  7. pod count against allocatable pods     OutOfpods
//  8. node pressure                          Evicted
//  9. cordon                                 NodeUnschedulable
//  10. the host shutting down                NodeShutdown
//
// The package does no I/O, and Held is its caller's: the caller serialises
// admissions (one lock over the decision and the record of the pod admitted,
// Held among it), so that two pods never both fit into the same room.
package admission
