// Package nodestatus says what the node is, as kubelet's node status
// setters and container manager do: its capacity (CPUs, memory, the data
// dir's file system, hugepages, pods), its allocatable (capacity less what
// is reserved for the system and for kubelet and the hard eviction
// thresholds), its labels, taints and addresses, and the flags that set
// them (--kube-reserved, --system-reserved, --node-labels,
// --register-with-taints) parsed with kubelet's rules.
package nodestatus
