package schemas

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// The system priority classes every cluster has (k8s.io/api scheduling's
// SystemClusterCritical and SystemNodeCritical, with their fixed values in
// pkg/apis/scheduling): the only classes a node can resolve without the API
// server.
const (
	SystemClusterCritical         = "system-cluster-critical"
	SystemNodeCritical            = "system-node-critical"
	SystemCriticalPriority  int32 = 2_000_000_000
	systemNodeCriticalValue int32 = SystemCriticalPriority + 1000
)

// systemPriority is the priority of a system class, by name.
func systemPriority(class string) (int32, bool) {
	switch class {
	case SystemClusterCritical:
		return SystemCriticalPriority, true
	case SystemNodeCritical:
		return systemNodeCriticalValue, true
	}
	return 0, false
}

// setPriority gives a pod that names a system class and no priority its
// class's value, as the API server's Priority admission does before any
// kubelet sees the pod: everything that ranks pods by spec.priority
// (eviction, critical pods, the node's shutdown, resizes) then sees it.
func setPriority(s *corev1.PodSpec) {
	if v, ok := systemPriority(s.PriorityClassName); ok && s.Priority == nil {
		s.Priority = &v
	}
}

// validatePriority refuses a priority that contradicts the system class
// the pod names, as the API server's Priority admission does.
func validatePriority(e *errs, s *corev1.PodSpec) {
	if v, ok := systemPriority(s.PriorityClassName); ok && s.Priority != nil && *s.Priority != v {
		e.invalid("pod.spec.priority", "the integer value of priority ("+strconv.Itoa(int(*s.Priority))+
			") must not be provided in pod spec; priority admission controller computed "+strconv.Itoa(int(v))+
			" from the given PriorityClass name")
	}
}
