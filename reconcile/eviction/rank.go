package eviction

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/jetlet/jetlet/schemas"
)

// SystemCriticalPriority is the priority from which a pod is critical
// (scheduling's system-node-critical and system-cluster-critical classes).
const SystemCriticalPriority = schemas.SystemCriticalPriority

// IsCritical says whether pod is critical to the node, which eviction never
// evicts and admission admits under pressure. kubelet's IsCriticalPod also
// counts static and mirror pods; jetlet has neither (every pod comes from
// the bus), so what remains is the priority rule. A pod that names a system
// class without a priority has the class's by then (schemas.SetPodDefaults,
// the API server's Priority admission).
func IsCritical(pod *corev1.Pod) bool {
	return corev1helpers.PodPriority(pod) >= SystemCriticalPriority
}

// podRankKey is what ranking compares of one pod, measured once before the
// sort: the usage of the resource under pressure and the pod's request of it.
type podRankKey struct {
	pod      *corev1.Pod
	measured bool // the runtime reported the pod
	priority int32
	usage    int64
	request  int64
}

// podCmp orders two pods, the one to evict first first.
type podCmp func(a, b podRankKey) int

// unmeasuredFirst puts a pod the runtime did not report before one it did
// (kubelet evicts the pod it has no stats for first); ok is false when both
// were measured and the caller must compare usage.
func unmeasuredFirst(a, b podRankKey) (order int, ok bool) {
	if a.measured && b.measured {
		return 0, false
	}
	return cmpBool(!a.measured, !b.measured), true
}

// exceedsRequest puts a pod using more than it requested first.
func exceedsRequest(a, b podRankKey) int {
	if order, ok := unmeasuredFirst(a, b); ok {
		return order
	}
	return cmpBool(a.usage > a.request, b.usage > b.request)
}

// lowerPriority puts the pod of lower priority first.
func lowerPriority(a, b podRankKey) int { return cmp.Compare(a.priority, b.priority) }

// moreAboveRequest puts the pod using the most beyond its request first.
func moreAboveRequest(a, b podRankKey) int {
	if order, ok := unmeasuredFirst(a, b); ok {
		return order
	}
	return cmp.Compare(b.usage-b.request, a.usage-a.request)
}

// rankOrders is kubelet's order of eviction for each resource: memory and
// disk by whether usage exceeds requests, then priority, then usage beyond
// requests; PIDs (which no pod requests) by priority, then usage.
var rankOrders = map[Signal][]podCmp{
	SignalMemoryAvailable:   {exceedsRequest, lowerPriority, moreAboveRequest},
	SignalNodeFsAvailable:   {exceedsRequest, lowerPriority, moreAboveRequest},
	SignalNodeFsInodesFree:  {exceedsRequest, lowerPriority, moreAboveRequest},
	SignalImageFsAvailable:  {exceedsRequest, lowerPriority, moreAboveRequest},
	SignalImageFsInodesFree: {exceedsRequest, lowerPriority, moreAboveRequest},
	SignalPIDAvailable:      {lowerPriority, moreAboveRequest},

	SignalContainerFsAvailable:  {exceedsRequest, lowerPriority, moreAboveRequest},
	SignalContainerFsInodesFree: {exceedsRequest, lowerPriority, moreAboveRequest},
}

// rankPods orders pods for eviction under pressure on signal, the first to
// evict first; usage is by pod UID.
func rankPods(pods []*corev1.Pod, signal Signal, usage map[string]PodUsage, dedicatedImageFs, splitContainerFs bool) {
	keys := make([]podRankKey, len(pods))
	for i, pod := range pods {
		u, measured := usage[string(pod.UID)]
		keys[i] = podRankKey{
			pod:      pod,
			measured: measured,
			priority: corev1helpers.PodPriority(pod),
			usage:    signalUsage(signal, u, dedicatedImageFs, splitContainerFs),
			request:  podRequest(pod, signalResource[signal]),
		}
	}
	order := rankOrders[signal]
	slices.SortStableFunc(keys, func(a, b podRankKey) int {
		for _, c := range order {
			if r := c(a, b); r != 0 {
				return r
			}
		}
		return 0
	})
	for i, k := range keys {
		pods[i] = k.pod
	}
}

// signalUsage is what a pod uses of what signal measures (kubelet's
// buildSignalToRankFunc). With a dedicated image file system, nodefs holds a
// pod's logs and volumes and imagefs and containerfs its containers'
// writable layers; with images split from writable layers (KEP-4191),
// nodefs and containerfs hold all of it and imagefs nothing of a pod's; on
// one file system, all of it counts for every disk signal.
func signalUsage(signal Signal, u PodUsage, dedicatedImageFs, splitContainerFs bool) int64 {
	switch signal {
	case SignalMemoryAvailable:
		return u.MemoryWorkingSet
	case SignalPIDAvailable:
		return u.Processes
	}
	var layers, logsAndVolumes DiskUsage
	for _, c := range u.Containers {
		if c.WritableLayer != nil {
			layers.add(*c.WritableLayer)
		}
		if c.Logs != nil {
			logsAndVolumes.add(*c.Logs)
		}
	}
	logsAndVolumes.add(u.Volumes)
	all := layers
	all.add(logsAndVolumes)
	imageFs := signal == SignalImageFsAvailable || signal == SignalImageFsInodesFree
	var disk DiskUsage
	switch {
	case dedicatedImageFs && splitContainerFs && imageFs:
		// Images only, which are no pod's.
	case dedicatedImageFs && splitContainerFs:
		disk = all
	case dedicatedImageFs && (imageFs || isContainerFs(signal)):
		disk = layers
	case dedicatedImageFs:
		disk = logsAndVolumes
	default:
		disk = all
	}
	if signalResource[signal] == resourceInodes {
		return disk.Inodes
	}
	return disk.Bytes
}

// podRequest is the pod's request of resource as kubelet sums it (init
// containers, sidecars, overhead, pod-level requests), 0 for inodes and PIDs,
// which no pod requests. (kubelet subtracts the ephemeral-storage request
// from inode counts too; jetlet does not mix the units.)
func podRequest(pod *corev1.Pod, resource corev1.ResourceName) int64 {
	q, ok := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})[resource]
	if !ok {
		return 0
	}
	return q.Value()
}
