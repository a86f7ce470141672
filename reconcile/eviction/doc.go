// Package eviction is kubelet's node-pressure eviction manager
// (pkg/kubelet/eviction): every period it observes the node's signals
// (memory.available, nodefs.*, imagefs.*, pid.available), compares them with
// the --eviction-hard and --eviction-soft thresholds (grace periods, minimum
// reclaim), keeps the MemoryPressure, DiskPressure and PIDPressure conditions
// (True until --eviction-pressure-transition-period after a threshold was
// last met), reclaims what the node can without pods (dead containers,
// unused images) and, only if that is not enough, evicts one pod per period
// in kubelet's ranking.
//
// It speaks the CRI's own types through roles it declares (PodStatsRuntime,
// ImageFsRuntime) with *runtime.Client's signatures, and acts through roles
// the agent wires: Reclaimer (the image and container garbage collectors),
// ActivePodLister and Killer (the pod workers).
package eviction
