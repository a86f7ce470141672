package reconcile

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// Waiting reasons of containers without a failure to report.
const (
	reasonContainerCreating = "ContainerCreating"
	reasonPodInitializing   = "PodInitializing"
)

// apiContainer is one container's status plus what kubelet keeps as
// lastTerminationState, which the phase needs and the wire status lacks.
type apiContainer struct {
	schemas.ContainerStatus
	// found: some instance exists.
	found bool
	// lastTerminated: the container is waiting to restart after an exit.
	lastTerminated bool
	lastExitCode   int32
}

// ToAPIStatus converts the runtime's view of the pod to the contract's
// PodStatus: phase as kubelet's getPhase, one status per container of the
// spec (init containers first), the newest sandbox. Revision and IntentSeq
// are left for the caller.
func (m *Kuberuntime) ToAPIStatus(pod *corev1.Pod, status *kubecontainer.PodStatus) *schemas.PodStatus {
	if status == nil {
		status = &kubecontainer.PodStatus{}
	}
	out := &schemas.PodStatus{
		UID:            string(pod.UID),
		Namespace:      pod.Namespace,
		Name:           pod.Name,
		Node:           m.cfg.NodeName,
		InitContainers: []schemas.ContainerStatus{},
		Containers:     []schemas.ContainerStatus{},
		ObservedAt:     m.cfg.Clock.Now().UTC(),
	}
	if len(status.SandboxStatuses) > 0 {
		s := status.SandboxStatuses[0]
		st := schemas.SandboxNotReady
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			st = schemas.SandboxReady
		}
		ips := podIPs(s, m.cfg.NodeIP)
		if ips == nil {
			ips = []string{} // "ips": [] on the wire, not null
		}
		out.Sandbox = &schemas.SandboxStatus{ID: s.Id, State: st, IPs: ips}
	}
	_, _, initDone := findNextInitContainerToRun(pod, status)
	inits := make([]apiContainer, len(pod.Spec.InitContainers))
	for i := range pod.Spec.InitContainers {
		inits[i] = m.apiContainerStatus(pod, status, &pod.Spec.InitContainers[i], reasonPodInitializing)
		out.InitContainers = append(out.InitContainers, inits[i].ContainerStatus)
	}
	apps := make([]apiContainer, len(pod.Spec.Containers))
	for i := range pod.Spec.Containers {
		waiting := reasonContainerCreating
		if !initDone {
			waiting = reasonPodInitializing
		}
		apps[i] = m.apiContainerStatus(pod, status, &pod.Spec.Containers[i], waiting)
		out.Containers = append(out.Containers, apps[i].ContainerStatus)
	}
	out.Phase = podPhase(pod, inits, apps)
	out.Conditions = podConditions(pod, initDone, inits, apps, out.Phase, out.ObservedAt)
	if c, ok := m.resizeInProgress(pod, status, out.ObservedAt); ok {
		out.Conditions = append(out.Conditions, c)
	}
	return out
}

// resizeInProgress is the pod's PodResizeInProgress condition, as kubelet's:
// some running container's applied resources, or its pod cgroup's, are not
// yet its spec's (pod
// is the allocated pod: a pending resize is not in progress), or the last
// attempt to apply them failed (reason Error, its message).
func (m *Kuberuntime) resizeInProgress(pod *corev1.Pod, status *kubecontainer.PodStatus, now time.Time) (schemas.PodCondition, bool) {
	c := schemas.PodCondition{Type: schemas.PodResizeInProgress, Status: schemas.ConditionTrue, LastTransitionTime: now}
	if msg, failed := m.reasons.resizeError(string(pod.UID)); failed {
		c.Reason, c.Message = schemas.ReasonResizeError, msg
		return c, true
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if cs := status.FindContainerStatusByName(list[i].Name); cs != nil && ResizeInProgress(&list[i], cs) {
				return c, true
			}
		}
	}
	return c, m.podResizeInProgress(pod, status)
}

// allocatedResources are the requests the node admitted for c (the
// allocated pod's); nil when it has none.
func allocatedResources(c *corev1.Container) corev1.ResourceList {
	if len(c.Resources.Requests) == 0 {
		return nil
	}
	return c.Resources.Requests.DeepCopy()
}

// appliedAPIResources are a running container's resources as the status
// shows them, kubelet's: cpu request and limits as the runtime applied
// them, the memory request allocated (cgroups hold none). A value the
// runtime cannot tell from the allocated one (both at or below the minimum
// shares or quota) shows the allocated one; the minimum shares of a
// container without a cpu request show none. Nil when the runtime reports
// none.
func appliedAPIResources(c *corev1.Container, applied *kubecontainer.ContainerResources) *corev1.ResourceRequirements {
	if applied == nil {
		return nil
	}
	out := &corev1.ResourceRequirements{}
	put := func(list *corev1.ResourceList, name corev1.ResourceName, q *resource.Quantity) {
		if q == nil {
			return
		}
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[name] = *q
	}
	cpuRequest, cpuLimit := applied.CPURequest, applied.CPULimit
	if cpuRequest != nil && cpuRequest.MilliValue() <= minShares {
		// The minimum shares: the request allocated, if it is one too.
		switch want, ok := c.Resources.Requests[corev1.ResourceCPU]; {
		case !ok:
			cpuRequest = nil
		case want.MilliValue() <= minShares:
			cpuRequest = &want
		}
	}
	if want, ok := c.Resources.Limits[corev1.ResourceCPU]; ok && cpuLimit != nil && cpuLimit.MilliValue() <= minMilliCPULimit && want.MilliValue() <= minMilliCPULimit {
		cpuLimit = &want
	}
	put(&out.Requests, corev1.ResourceCPU, cpuRequest)
	if want, ok := c.Resources.Requests[corev1.ResourceMemory]; ok {
		put(&out.Requests, corev1.ResourceMemory, &want)
	}
	put(&out.Limits, corev1.ResourceCPU, cpuLimit)
	put(&out.Limits, corev1.ResourceMemory, applied.MemoryLimit)
	return out
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// apiContainerStatus is kubelet's convertToAPIContainerStatuses for one container.
func (m *Kuberuntime) apiContainerStatus(pod *corev1.Pod, status *kubecontainer.PodStatus, c *corev1.Container, waitingReason string) apiContainer {
	out := apiContainer{ContainerStatus: schemas.ContainerStatus{
		Name: c.Name, Image: c.Image, State: schemas.ContainerWaiting, Reason: waitingReason,
		AllocatedResources: allocatedResources(c),
	}}
	var newest, previous *kubecontainer.ContainerStatus
	for _, cs := range status.ContainerStatuses {
		if cs.Name != c.Name {
			continue
		}
		if newest == nil {
			newest = cs
		} else {
			previous = cs
			break
		}
	}
	if newest != nil {
		out.found = true
		out.ContainerID = newest.ID
		out.RestartCount = int32(newest.RestartCount)
		out.StartedAt = formatTime(newest.StartedAt)
		switch newest.State {
		case kubecontainer.ContainerRunning:
			out.State, out.Reason = schemas.ContainerRunning, ""
			out.Started = m.started(c, newest)
			out.Ready = out.Started && m.ready(c, newest)
			out.Resources = appliedAPIResources(c, newest.Resources)
		case kubecontainer.ContainerExited:
			out.State = schemas.ContainerExited
			out.ExitCode = newest.ExitCode
			out.Reason = newest.Reason
			if out.Reason == "" {
				out.Reason = kubecontainer.DiedReason(newest)
			}
			out.Message = newest.Message
			out.FinishedAt = formatTime(newest.FinishedAt)
		case kubecontainer.ContainerCreated:
			out.State, out.Reason = schemas.ContainerCreated, ""
		default:
			out.State, out.Reason = schemas.ContainerUnknown, "ContainerStatusUnknown"
		}
		if previous != nil && previous.State == kubecontainer.ContainerExited && newest.State != kubecontainer.ContainerExited {
			out.lastTerminated, out.lastExitCode = true, previous.ExitCode
		}
	}
	out.LastState = lastState(previous)
	// A container that will be started again and whose last start failed
	// waits, with that failure as its reason (CrashLoopBackOff, ErrImagePull).
	if shouldContainerBeRestarted(c, pod, status) {
		if f, ok := m.reasons.get(string(pod.UID), c.Name); ok {
			if newest != nil && newest.State == kubecontainer.ContainerExited {
				out.lastTerminated, out.lastExitCode = true, newest.ExitCode
				out.LastState = lastState(newest)
			}
			out.State, out.Reason, out.Message = schemas.ContainerWaiting, f.err.Error(), f.message
		}
	}
	return out
}

// lastState is how the instance before the one shown ended, as kubelet's
// lastTerminationState: nil unless it exited.
func lastState(cs *kubecontainer.ContainerStatus) *schemas.LastState {
	if cs == nil || cs.State != kubecontainer.ContainerExited {
		return nil
	}
	reason := cs.Reason
	if reason == "" {
		reason = kubecontainer.DiedReason(cs)
	}
	return &schemas.LastState{ExitCode: cs.ExitCode, Reason: reason, FinishedAt: formatTime(cs.FinishedAt), Message: cs.Message}
}

// started: the running instance's startup probe (if any) succeeded.
func (m *Kuberuntime) started(c *corev1.Container, cs *kubecontainer.ContainerStatus) bool {
	if c.StartupProbe == nil {
		return true
	}
	r, ok := m.cfg.Startup.Get(cs.ID)
	return ok && r == kubecontainer.ProbeSuccess
}

// ready: the running instance's readiness probe (if any) succeeded.
func (m *Kuberuntime) ready(c *corev1.Container, cs *kubecontainer.ContainerStatus) bool {
	if c.ReadinessProbe == nil {
		return true
	}
	r, ok := m.cfg.Readiness.Get(cs.ID)
	return ok && r == kubecontainer.ProbeSuccess
}

// podPhase is kubelet's getPhase (for a pod not yet terminal). inits are
// in the order of pod.Spec.InitContainers, apps of pod.Spec.Containers.
// Sidecars count apart: a running one is running (and pending
// initialisation until started), an exited one does not count. A failed
// init container fails the pod when its restart policy (its own, else the
// pod's) is Never; when every app container has stopped, the pod runs while
// one of them will be restarted (by its rules, its policy, or the pod's),
// else it succeeded if they all did, else it failed.
func podPhase(pod *corev1.Pod, inits, apps []apiContainer) schemas.PodPhase {
	pendingInit, failedInit := 0, 0
	for i, s := range inits {
		c := &pod.Spec.InitContainers[i]
		if kubecontainer.IsSidecar(c) {
			continue
		}
		failed := false
		switch {
		case !s.found && !s.lastTerminated:
			pendingInit++
		case s.State == schemas.ContainerRunning:
			pendingInit++
		case s.State == schemas.ContainerExited:
			failed = s.ExitCode != 0
		case s.State == schemas.ContainerUnknown:
			failed = true
		case s.lastTerminated:
			failed = s.lastExitCode != 0
		default:
			pendingInit++
		}
		if failed && !kubecontainer.RestartsOnFailure(c, &pod.Spec) {
			failedInit++
		}
	}
	unknown, running, waiting, stopped, succeeded, restarting := 0, 0, 0, 0, 0, 0
	for i, s := range apps {
		exitCode := int32(0)
		switch {
		case !s.found && !s.lastTerminated:
			// No instance at all: waiting to be created (kubelet's default
			// Waiting status).
			waiting++
			continue
		case s.State == schemas.ContainerRunning:
			running++
			continue
		case s.State == schemas.ContainerExited:
			exitCode = s.ExitCode
			if exitCode == 0 {
				succeeded++
			}
		case s.State == schemas.ContainerUnknown:
			// kubelet reports these as terminated with exit code 137.
			exitCode = 137
		case s.lastTerminated:
			exitCode = s.lastExitCode
		default:
			waiting++
			continue
		}
		stopped++
		if kubecontainer.ContainerShouldRestart(&pod.Spec.Containers[i], &pod.Spec, exitCode) {
			restarting++
		}
	}
	anyAppStarted := running > 0 || stopped > 0
	for i, s := range inits {
		if !kubecontainer.IsSidecar(&pod.Spec.InitContainers[i]) {
			continue
		}
		switch {
		case s.State == schemas.ContainerRunning:
			if !s.Started {
				pendingInit++
			}
			running++
		case s.State == schemas.ContainerExited, s.State == schemas.ContainerUnknown, s.lastTerminated:
			// A sidecar that stopped does not decide the phase.
		default:
			pendingInit++
			waiting++
		}
	}
	if failedInit > 0 {
		return schemas.PhaseFailed
	}
	switch {
	case pendingInit > 0 && !anyAppStarted:
		return schemas.PhasePending
	case waiting > 0:
		return schemas.PhasePending
	case running > 0 && unknown == 0:
		return schemas.PhaseRunning
	case running == 0 && stopped > 0 && unknown == 0:
		if restarting > 0 {
			return schemas.PhaseRunning
		}
		if stopped == succeeded {
			return schemas.PhaseSucceeded
		}
		return schemas.PhaseFailed
	}
	return schemas.PhasePending
}

// Condition reasons, kubelet's.
const (
	reasonContainersNotInitialized = "ContainersNotInitialized"
	reasonContainersNotReady       = "ContainersNotReady"
	reasonPodCompleted             = "PodCompleted"
)

// podConditions are kubelet's Initialized, ContainersReady and Ready (no
// readiness gates): initialised once the init containers are done; ready
// when every app container and sidecar is ready; a succeeded pod is
// initialised and not ready (PodCompleted). Every lastTransitionTime is now:
// the pod workers keep the previous one while a condition's status stays.
func podConditions(pod *corev1.Pod, initDone bool, inits, apps []apiContainer, phase schemas.PodPhase, now time.Time) []schemas.PodCondition {
	cond := func(t schemas.PodConditionType, ok bool, reason string) schemas.PodCondition {
		c := schemas.PodCondition{Type: t, Status: schemas.ConditionFalse, Reason: reason, LastTransitionTime: now}
		if ok {
			c.Status, c.Reason = schemas.ConditionTrue, ""
		}
		return c
	}
	if phase == schemas.PhaseSucceeded {
		return []schemas.PodCondition{
			{Type: schemas.PodInitialized, Status: schemas.ConditionTrue, Reason: reasonPodCompleted, LastTransitionTime: now},
			{Type: schemas.PodContainersReady, Status: schemas.ConditionFalse, Reason: reasonPodCompleted, LastTransitionTime: now},
			{Type: schemas.PodReady, Status: schemas.ConditionFalse, Reason: reasonPodCompleted, LastTransitionTime: now},
		}
	}
	ready := true
	for i := range apps {
		ready = ready && apps[i].Ready
	}
	for i := range inits {
		if kubecontainer.IsSidecar(&pod.Spec.InitContainers[i]) {
			ready = ready && inits[i].Ready
		}
	}
	return []schemas.PodCondition{
		cond(schemas.PodInitialized, initDone, reasonContainersNotInitialized),
		cond(schemas.PodContainersReady, ready, reasonContainersNotReady),
		cond(schemas.PodReady, ready, reasonContainersNotReady),
	}
}
