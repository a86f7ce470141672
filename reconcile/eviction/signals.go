package eviction

import corev1 "k8s.io/api/core/v1"

// Signal names what a threshold is compared with: kubelet's eviction signals.
type Signal string

// The signals jetlet observes, kubelet's names.
const (
	// SignalMemoryAvailable is the machine's memory less the root cgroup's
	// working set (usage less inactive file pages).
	SignalMemoryAvailable Signal = "memory.available"
	// SignalNodeFsAvailable is the free space of the file system holding the
	// data dir (pods' volumes, logs).
	SignalNodeFsAvailable Signal = "nodefs.available"
	// SignalNodeFsInodesFree is the free inodes of that file system.
	SignalNodeFsInodesFree Signal = "nodefs.inodesFree"
	// SignalImageFsAvailable is the free space of the file system the
	// runtime keeps images and containers' writable layers on.
	SignalImageFsAvailable Signal = "imagefs.available"
	// SignalImageFsInodesFree is the free inodes of that file system.
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	// SignalContainerFsAvailable is the free space of the file system the
	// runtime keeps containers' writable layers on (KEP-4191): imagefs's
	// unless the runtime splits them from its images. Its thresholds are
	// nodefs's or imagefs's (containerFsThresholds).
	SignalContainerFsAvailable Signal = "containerfs.available"
	// SignalContainerFsInodesFree is the free inodes of that file system.
	SignalContainerFsInodesFree Signal = "containerfs.inodesFree"
	// SignalPIDAvailable is the kernel's task limit less the tasks running.
	SignalPIDAvailable Signal = "pid.available"
)

// resourceInodes and resourcePIDs are kubelet's internal resource names for
// what inode and PID signals reclaim; no pod requests them.
const (
	resourceInodes corev1.ResourceName = "inodes"
	resourcePIDs   corev1.ResourceName = "pids"
)

// signalResource is the resource each signal's pressure starves, which an
// eviction message names.
var signalResource = map[Signal]corev1.ResourceName{
	SignalMemoryAvailable:   corev1.ResourceMemory,
	SignalNodeFsAvailable:   corev1.ResourceEphemeralStorage,
	SignalNodeFsInodesFree:  resourceInodes,
	SignalImageFsAvailable:  corev1.ResourceEphemeralStorage,
	SignalImageFsInodesFree: resourceInodes,
	SignalPIDAvailable:      resourcePIDs,

	SignalContainerFsAvailable:  corev1.ResourceEphemeralStorage,
	SignalContainerFsInodesFree: resourceInodes,
}

// signalCondition is the node condition a met threshold of each signal sets.
var signalCondition = map[Signal]corev1.NodeConditionType{
	SignalMemoryAvailable:   corev1.NodeMemoryPressure,
	SignalNodeFsAvailable:   corev1.NodeDiskPressure,
	SignalNodeFsInodesFree:  corev1.NodeDiskPressure,
	SignalImageFsAvailable:  corev1.NodeDiskPressure,
	SignalImageFsInodesFree: corev1.NodeDiskPressure,
	SignalPIDAvailable:      corev1.NodePIDPressure,

	SignalContainerFsAvailable:  corev1.NodeDiskPressure,
	SignalContainerFsInodesFree: corev1.NodeDiskPressure,
}

func validSignal(s Signal) bool {
	_, ok := signalResource[s]
	return ok
}

// isContainerFs says whether s is a containerfs signal.
func isContainerFs(s Signal) bool {
	return s == SignalContainerFsAvailable || s == SignalContainerFsInodesFree
}
