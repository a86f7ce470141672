package bridge

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/schemas"
)

// statusOf is the status of pod once its node's status st is taken in:
// what the node owns (phase, reason, conditions of its own, IPs, the
// containers' statuses) is st's, the rest stays the pod's (the
// scheduler's PodScheduled, the API server's qosClass, a readiness gate's
// condition), as kubelet's status manager merges it. hostIPs are the
// node's addresses.
func statusOf(pod *corev1.Pod, st *schemas.PodStatus, hostIPs []string) corev1.PodStatus {
	s := *pod.Status.DeepCopy()
	s.Phase = phaseOf(st)
	s.Reason, s.Message = st.Reason, st.Message
	s.HostIP, s.HostIPs = "", nil
	for _, ip := range hostIPs {
		s.HostIPs = append(s.HostIPs, corev1.HostIP{IP: ip})
	}
	if len(hostIPs) > 0 {
		s.HostIP = hostIPs[0]
	}
	s.PodIP, s.PodIPs = "", nil
	if st.Sandbox != nil {
		for _, ip := range st.Sandbox.IPs {
			s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: ip})
		}
		if len(st.Sandbox.IPs) > 0 {
			s.PodIP = st.Sandbox.IPs[0]
		}
	}
	if s.StartTime == nil {
		s.StartTime = &metav1.Time{Time: st.ObservedAt}
	}
	s.Conditions = slices.DeleteFunc(s.Conditions, func(c corev1.PodCondition) bool {
		return slices.ContainsFunc(st.Conditions, func(own schemas.PodCondition) bool { return string(own.Type) == string(c.Type) })
	})
	for _, c := range st.Conditions {
		s.Conditions = append(s.Conditions, corev1.PodCondition{
			Type: corev1.PodConditionType(c.Type), Status: corev1.ConditionStatus(c.Status),
			Reason: c.Reason, Message: c.Message, LastTransitionTime: metav1.NewTime(c.LastTransitionTime),
		})
	}
	s.InitContainerStatuses = containerStatusesOf(st.InitContainers)
	s.ContainerStatuses = containerStatusesOf(st.Containers)
	return s
}

// phaseOf is Kubernetes' phase of a jetlet status: a pod being deleted is
// Running while a container runs; a deleted one ends Succeeded when every
// container exited 0, else Failed, as kubelet ends a deleted pod.
func phaseOf(st *schemas.PodStatus) corev1.PodPhase {
	switch st.Phase {
	case schemas.PhaseTerminating:
		if slices.ContainsFunc(st.Containers, func(c schemas.ContainerStatus) bool { return c.State == schemas.ContainerRunning }) {
			return corev1.PodRunning
		}
		return corev1.PodPending
	case schemas.PhaseTerminated:
		if slices.ContainsFunc(st.Containers, func(c schemas.ContainerStatus) bool { return c.ExitCode != 0 }) {
			return corev1.PodFailed
		}
		return corev1.PodSucceeded
	}
	return corev1.PodPhase(st.Phase)
}

func containerStatusesOf(in []schemas.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, c := range in {
		cs := corev1.ContainerStatus{
			Name: c.Name, ContainerID: c.ContainerID, Image: c.Image,
			Ready: c.Ready, Started: &c.Started, RestartCount: c.RestartCount,
			Resources: c.Resources, AllocatedResources: c.AllocatedResources,
		}
		switch c.State {
		case schemas.ContainerRunning:
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: timeOf(c.StartedAt)}
		case schemas.ContainerExited:
			cs.State.Terminated = &corev1.ContainerStateTerminated{
				ExitCode: c.ExitCode, Reason: c.Reason, Message: c.Message, ContainerID: c.ContainerID,
				StartedAt: timeOf(c.StartedAt), FinishedAt: timeOf(c.FinishedAt),
			}
		default: // Created, Waiting, Unknown: not running yet, as kubelet says
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: c.Reason, Message: c.Message}
		}
		if l := c.LastState; l != nil {
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
				ExitCode: l.ExitCode, Reason: l.Reason, Message: l.Message, FinishedAt: timeOf(l.FinishedAt),
			}
		}
		out = append(out, cs)
	}
	return out
}

// timeOf parses a status's RFC 3339 time; "" (or garbage) is the zero time.
func timeOf(s string) metav1.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return metav1.NewTime(t)
}
