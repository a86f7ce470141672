package nodeshutdown

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
)

// podGroup is one group's pods, stopped together.
type podGroup struct {
	PriorityGrace
	pods []*corev1.Pod
}

// groupByPriority puts each pod in its group, as kubelet's: the group of the
// highest priority at or below the pod's; a pod below every group goes to the
// lowest, one above every group to the highest. groups are sorted from low
// to high; so is the result, which has one entry per group, empty or not.
func groupByPriority(groups []PriorityGrace, pods []*corev1.Pod) []podGroup {
	out := make([]podGroup, len(groups))
	for i, g := range groups {
		out[i].PriorityGrace = g
	}
	for _, pod := range pods {
		priority := corev1helpers.PodPriority(pod)
		// The first group above the pod's priority; the pod's is the one before.
		i := sort.Search(len(out), func(i int) bool { return out[i].Priority > priority }) - 1
		out[max(i, 0)].pods = append(out[max(i, 0)].pods, pod)
	}
	return out
}

// podGrace is the seconds a pod of group g is given to stop: the group's
// grace period, or the pod's terminationGracePeriodSeconds when that is
// shorter (kubelet's gracePeriodOverride).
func podGrace(pod *corev1.Pod, g PriorityGrace) int64 {
	if t := pod.Spec.TerminationGracePeriodSeconds; t != nil && *t <= g.GracePeriodSeconds {
		return *t
	}
	return g.GracePeriodSeconds
}
