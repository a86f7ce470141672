// Package nodeshutdown is kubelet's graceful node shutdown manager
// (pkg/kubelet/nodeshutdown): while enabled it holds a delay inhibitor lock
// of systemd-logind, so that the host waits for it before it goes down;
// when logind says the host is about to shut down (PrepareForShutdown), the
// node refuses new pods (NodeShutdown), says it is not ready, and stops its
// pods in groups by priority (kubelet's order: the lowest priority first,
// critical pods last), each group given its grace period; then it waits for
// what the pods' ends published and releases the lock.
//
// The groups, their grace and kubelet's validation are pure (Config,
// groupByPriority). The manager acts through roles the agent wires: Logind
// (internal/logind over D-Bus), ActivePodLister and Killer (the pod
// workers) and a flush of the publishers.
package nodeshutdown
