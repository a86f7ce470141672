package reconcile

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/userns"
	"github.com/jetlet/jetlet/schemas"
)

// PodActions is the plan computePodActions makes for one pod, after kubelet's
// podActions.
type PodActions struct {
	// KillPod: stop every running container and every sandbox of the pod.
	KillPod bool
	// CreateSandbox: (re)create the sandbox. With KillPod, the old one is
	// stopped first and the init containers are purged.
	CreateSandbox bool
	// SandboxID is the existing sandbox, to start containers in (or, with
	// CreateSandbox, the one being replaced).
	SandboxID string
	// Attempt of the sandbox to create.
	Attempt uint32
	// InitContainersToStart are indexes into pod.Spec.InitContainers, in
	// spec order: the next init container to run, and sidecars (restartable
	// init containers) to restart.
	InitContainersToStart []int
	// ContainersToStart are indexes into pod.Spec.Containers.
	ContainersToStart []int
	// ContainersToKill: init containers (last first), then app containers
	// in spec order.
	ContainersToKill []ContainerToKill
	// ContainersToUpdate are the running containers (sidecars first, then
	// app containers) resized in place, by resource: memory, then cpu, as
	// SyncPod applies them; in each, decreases come before increases.
	ContainersToUpdate map[corev1.ResourceName][]ContainerToUpdate
	// UpdatePodResources resizes the pod cgroup in place (pod-level
	// resources, or the containers' sums), around ContainersToUpdate; nil
	// for none. SyncPod plans it (planPodResize): it needs the record of
	// what the pod cgroup holds.
	UpdatePodResources *PodResourcesUpdate
}

// ContainerToKill is one container instance the plan stops.
type ContainerToKill struct {
	// ID of the instance.
	ID string
	// Name of the container.
	Name string
	// Container is its spec (init or app).
	Container *corev1.Container
	// Reason is one of the contract's ContainerKilled reasons: SpecChanged,
	// LivenessProbe, StartupProbe, Unknown.
	Reason string
	// Message says why, for people.
	Message string
}

// Probes are the probe results the plan consults; nil members know nothing.
type Probes struct {
	Liveness kubecontainer.ProbeResults
	Startup  kubecontainer.ProbeResults
}

// String renders the plan on one line, for logs and test failures.
func (a PodActions) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "KillPod=%t CreateSandbox=%t", a.KillPod, a.CreateSandbox)
	if a.SandboxID != "" {
		fmt.Fprintf(&b, " SandboxID=%s", a.SandboxID)
	}
	fmt.Fprintf(&b, " Attempt=%d", a.Attempt)
	if len(a.InitContainersToStart) > 0 {
		fmt.Fprintf(&b, " StartInit=%v", a.InitContainersToStart)
	}
	fmt.Fprintf(&b, " Start=%v", a.ContainersToStart)
	for _, name := range resizeOrder {
		if list := a.ContainersToUpdate[name]; len(list) > 0 {
			fmt.Fprintf(&b, " Update[%s]=[", name)
			for i, u := range list {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%s(%s) %s -> %s", u.Name, u.ID, u.Current, u.Desired)
			}
			b.WriteString("]")
		}
	}
	if u := a.UpdatePodResources; u != nil {
		fmt.Fprintf(&b, " UpdatePod=[%s -> %s]", podResourcesString(u.Current), podResourcesString(u.Desired))
	}
	if len(a.ContainersToKill) > 0 {
		b.WriteString(" Kill=[")
		for i, k := range a.ContainersToKill {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s(%s) %s: %s", k.Name, k.ID, k.Reason, k.Message)
		}
		b.WriteString("]")
	}
	return b.String()
}

// networkNamespaceForPod is the network namespace mode the pod's sandbox must have.
func networkNamespaceForPod(pod *corev1.Pod) runtimeapi.NamespaceMode {
	if pod.Spec.HostNetwork {
		return runtimeapi.NamespaceMode_NODE
	}
	return runtimeapi.NamespaceMode_POD
}

// inUserNamespace says whether the sandbox has a user namespace of its own;
// one that reports no options (containerd 1.6) has the host's.
func inUserNamespace(s *runtimeapi.PodSandboxStatus) bool {
	ns := s.GetLinux().GetNamespaces().GetOptions().GetUsernsOptions()
	return ns != nil && ns.GetMode() == runtimeapi.NamespaceMode_POD
}

// podSandboxChanged says whether a new sandbox is needed, its attempt, and the
// id of the current one.
func podSandboxChanged(pod *corev1.Pod, status *kubecontainer.PodStatus) (bool, uint32, string) {
	if status == nil || len(status.SandboxStatuses) == 0 {
		return true, 0, ""
	}
	ready := 0
	for _, s := range status.SandboxStatuses {
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	newest := status.SandboxStatuses[0]
	attempt := newest.GetMetadata().GetAttempt()
	switch {
	case ready > 1:
		// Several ready sandboxes: reconcile them into one.
		return true, attempt + 1, newest.Id
	case newest.State != runtimeapi.PodSandboxState_SANDBOX_READY:
		return true, attempt + 1, newest.Id
	case newest.GetLinux().GetNamespaces().GetOptions().GetNetwork() != networkNamespaceForPod(pod),
		inUserNamespace(newest) == userns.HostUsers(pod):
		// hostNetwork or hostUsers changed (an intent may change either,
		// unlike an API server's pod): a new sandbox, the old one is not
		// reused.
		return true, attempt + 1, ""
	case !pod.Spec.HostNetwork && newest.GetNetwork().GetIp() == "" && !status.NetworkDown:
		// kubelet's: the network plugin failed. With the network down, a
		// sandbox has no IP by design (kubelet would start no such pod).
		return true, attempt + 1, newest.Id
	}
	return false, attempt, newest.Id
}

// podMayRestart: some app container may be restarted, by its own restart
// policy or rules or by the pod's (kubelet's shouldRestartOnFailure with
// container restart rules).
func podMayRestart(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool {
		return kubecontainer.IsContainerRestartable(&c, &pod.Spec)
	})
}

// containerDone: c stopped and its restart policy (and rules) do not
// restart it after its last exit.
func containerDone(c *corev1.Container, pod *corev1.Pod, status *kubecontainer.PodStatus) bool {
	cs := status.FindContainerStatusByName(c.Name)
	if cs == nil || cs.State == kubecontainer.ContainerRunning {
		return false
	}
	return !kubecontainer.ContainerShouldRestart(c, &pod.Spec, cs.ExitCode)
}

// isInitContainerFailed: an init container failed when it was OOM-killed,
// exited non-zero, or is in an unknown state.
func isInitContainerFailed(cs *kubecontainer.ContainerStatus) bool {
	switch {
	case cs.Reason == schemas.ReasonOOMKilled:
		return true
	case cs.State == kubecontainer.ContainerExited && cs.ExitCode != 0:
		return true
	case cs.State == kubecontainer.ContainerUnknown:
		return true
	}
	return false
}

// findNextInitContainerToRun returns the status of the last failed init
// container (if any), the next init container to run, and whether
// initialisation is done.
func findNextInitContainerToRun(pod *corev1.Pod, status *kubecontainer.PodStatus) (*kubecontainer.ContainerStatus, *corev1.Container, bool) {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return nil, nil, true
	}
	// A running app container means every init container ran at some point,
	// even if their instances have been removed since.
	for i := range pod.Spec.Containers {
		cs := status.FindContainerStatusByName(pod.Spec.Containers[i].Name)
		if cs != nil && cs.State == kubecontainer.ContainerRunning {
			return nil, nil, true
		}
	}
	// The last failed one, if any.
	for i := len(inits) - 1; i >= 0; i-- {
		cs := status.FindContainerStatusByName(inits[i].Name)
		if cs != nil && isInitContainerFailed(cs) {
			return cs, &inits[i], false
		}
	}
	// No failure: find the furthest one that ran.
	for i := len(inits) - 1; i >= 0; i-- {
		cs := status.FindContainerStatusByName(inits[i].Name)
		if cs == nil {
			continue
		}
		if cs.State == kubecontainer.ContainerRunning {
			return nil, nil, false
		}
		if cs.State == kubecontainer.ContainerExited {
			if i == len(inits)-1 {
				return nil, nil, true
			}
			return nil, &inits[i+1], false
		}
	}
	return nil, &inits[0], false
}

// shouldContainerBeRestarted says whether a container that is not running
// must be (re)started, after kubelet's ShouldContainerBeRestarted.
func shouldContainerBeRestarted(c *corev1.Container, pod *corev1.Pod, status *kubecontainer.PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	cs := status.FindContainerStatusByName(c.Name)
	if cs == nil {
		// Never started (or every instance was garbage collected).
		return true
	}
	switch cs.State {
	case kubecontainer.ContainerRunning:
		return false
	case kubecontainer.ContainerUnknown, kubecontainer.ContainerCreated:
		return true
	}
	// A sidecar's policy is Always, whatever the pod's.
	return kubecontainer.ContainerShouldRestart(c, &pod.Spec, cs.ExitCode)
}

// ComputePodActions decides what SyncPod must do to bring the runtime's pod
// to the spec. It is pure: the same pod, status and probe results give the
// same plan.
func ComputePodActions(pod *corev1.Pod, status *kubecontainer.PodStatus, probes Probes) PodActions {
	if status == nil {
		status = &kubecontainer.PodStatus{}
	}
	create, attempt, sandboxID := podSandboxChanged(pod, status)
	a := PodActions{
		KillPod:       create,
		CreateSandbox: create,
		SandboxID:     sandboxID,
		Attempt:       attempt,
	}

	// A new sandbox means everything is killed and recreated, init
	// containers included.
	if create {
		if !podMayRestart(pod) && attempt != 0 && len(status.ContainerStatuses) != 0 {
			// A pod none of whose containers may restart and that already
			// ran: it is done, do not give it a new sandbox. (No container
			// status at all means none was ever created: retry the sandbox.)
			a.CreateSandbox = false
			return a
		}
		var toStart []int
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			if containerDone(c, pod, status) {
				continue
			}
			toStart = append(toStart, i)
		}
		// Initialised and nothing to start: no new sandbox.
		if len(toStart) == 0 {
			done := anyRegularContainerCreated(pod, status)
			if !hasSidecar(pod) {
				_, _, done = findNextInitContainerToRun(pod, status)
			}
			if done {
				a.CreateSandbox = false
				return a
			}
		}
		if len(pod.Spec.InitContainers) != 0 {
			a.InitContainersToStart = []int{0}
			return a
		}
		a.ContainersToStart = toStart
		return a
	}

	// Initialisation first: app containers wait until it is done.
	if initialized := computeInitContainerActions(pod, status, probes, &a); a.KillPod || !initialized {
		return a
	}

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := status.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != kubecontainer.ContainerRunning {
			if shouldContainerBeRestarted(c, pod, status) {
				a.ContainersToStart = append(a.ContainersToStart, i)
				if cs != nil && cs.State == kubecontainer.ContainerUnknown {
					// It may still run: kill it first.
					a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{
						ID: cs.ID, Name: c.Name, Container: c, Reason: schemas.ReasonUnknown,
						Message: fmt.Sprintf("Container is in %q state, try killing it before restart", cs.State),
					})
				}
			}
			continue
		}
		// Running: kill it if its spec changed or a probe failed.
		var reason, message string
		restart := kubecontainer.RestartsOnFailure(c, &pod.Spec)
		if containerChanged(c, cs) {
			reason = schemas.ReasonSpecChanged
			message = fmt.Sprintf("Container %s definition changed", c.Name)
			// A new spec restarts, whatever the policy.
			restart = true
		} else if r, ok := probeGet(probes.Liveness, cs.ID); ok && r == kubecontainer.ProbeFailure {
			reason = schemas.ReasonLivenessProbe
			message = fmt.Sprintf("Container %s failed liveness probe", c.Name)
		} else if r, ok := probeGet(probes.Startup, cs.ID); ok && r == kubecontainer.ProbeFailure {
			reason = schemas.ReasonStartupProbe
			message = fmt.Sprintf("Container %s failed startup probe", c.Name)
		} else if !planResize(&a, c, cs, func() { a.ContainersToStart = append(a.ContainersToStart, i) }) {
			// Its resizePolicy restarts it, whatever the restart policy.
			continue
		} else {
			keep++
			continue
		}
		if restart {
			message += ", will be restarted"
			a.ContainersToStart = append(a.ContainersToStart, i)
		}
		a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{
			ID: cs.ID, Name: c.Name, Container: c, Reason: reason, Message: message,
		})
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		// Nothing runs and nothing will: stop the sandbox too. Sidecars do
		// not keep the pod alive: they are not restarted, the kill stops them.
		a.KillPod = true
		a.InitContainersToStart = nil
	}
	return a
}

func probeGet(p kubecontainer.ProbeResults, id string) (kubecontainer.ProbeResult, bool) {
	if p == nil {
		return kubecontainer.ProbeUnknown, false
	}
	return p.Get(id)
}

func hasSidecar(pod *corev1.Pod) bool {
	for i := range pod.Spec.InitContainers {
		if kubecontainer.IsSidecar(&pod.Spec.InitContainers[i]) {
			return true
		}
	}
	return false
}

// anyRegularContainerCreated: some app container was created or runs, so
// every init container ran at some point (an exited one may be of a
// previous sandbox, as kubelet's).
func anyRegularContainerCreated(pod *corev1.Pod, status *kubecontainer.PodStatus) bool {
	for i := range pod.Spec.Containers {
		cs := status.FindContainerStatusByName(pod.Spec.Containers[i].Name)
		if cs != nil && (cs.State == kubecontainer.ContainerCreated || cs.State == kubecontainer.ContainerRunning) {
			return true
		}
	}
	return false
}

// computeInitContainerActions plans the init containers, as kubelet's
// computeInitContainerActions, and says whether initialisation is done. It
// walks them backwards to find the furthest one that ran (completed
// instances may have been removed), then keeps the sidecars before it
// running: a sidecar counts as done once it runs and its startup probe (if
// any) passed, and is restarted whenever it exits, whatever the pod's
// restart policy. A failed init container runs again, or kills the pod
// when its restart policy (its own, else the pod's) is Never.
func computeInitContainerActions(pod *corev1.Pod, status *kubecontainer.PodStatus, probes Probes, a *PodActions) bool {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return true
	}
	initialized := anyRegularContainerCreated(pod, status)
	previouslyInitialized := initialized
	kill := func(cs *kubecontainer.ContainerStatus, c *corev1.Container, reason, message string) {
		a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{ID: cs.ID, Name: c.Name, Container: c, Reason: reason, Message: message})
	}
	var toStart []int // backwards
	for i := len(inits) - 1; i >= 0; i-- {
		c := &inits[i]
		sidecar := kubecontainer.IsSidecar(c)
		cs := status.FindContainerStatusByName(c.Name)
		if cs == nil {
			// Never ran, or its instances were removed: a sidecar of an
			// initialised pod must run again.
			if previouslyInitialized && sidecar {
				toStart = append(toStart, i)
			}
			continue
		}
		if previouslyInitialized && !sidecar {
			// Done: only sidecars are kept running after initialisation.
			continue
		}
		switch cs.State {
		case kubecontainer.ContainerCreated:
			// Created but never started: start it.
			toStart = append(toStart, i)
		case kubecontainer.ContainerRunning:
			if !sidecar {
				break // wait for it to finish
			}
			if c.StartupProbe != nil {
				r, ok := probeGet(probes.Startup, cs.ID)
				if !ok || r != kubecontainer.ProbeSuccess {
					if ok && r == kubecontainer.ProbeFailure {
						kill(cs, c, schemas.ReasonStartupProbe, fmt.Sprintf("Init container %s failed startup probe", c.Name))
						toStart = append(toStart, i)
					}
					break // not started yet: the next one waits
				}
			}
			if i == len(inits)-1 {
				initialized = true
			} else if !previouslyInitialized {
				toStart = append(toStart, i+1)
			}
			if containerChanged(c, cs) {
				kill(cs, c, schemas.ReasonSpecChanged, fmt.Sprintf("Init container %s definition changed", c.Name))
				toStart = append(toStart, i)
				break
			}
			if r, ok := probeGet(probes.Liveness, cs.ID); ok && r == kubecontainer.ProbeFailure {
				kill(cs, c, schemas.ReasonLivenessProbe, fmt.Sprintf("Init container %s failed liveness probe", c.Name))
				toStart = append(toStart, i)
				break
			}
			planResize(a, c, cs, func() { toStart = append(toStart, i) })
		case kubecontainer.ContainerExited:
			if sidecar {
				toStart = append(toStart, i)
				break
			}
			if isInitContainerFailed(cs) {
				if !kubecontainer.RestartsOnFailure(c, &pod.Spec) {
					a.KillPod, a.InitContainersToStart = true, nil
					return false
				}
				toStart = append(toStart, i)
				break
			}
			if i == len(inits)-1 {
				initialized = true
			} else {
				toStart = append(toStart, i+1)
			}
		default: // unknown: it may still run, kill it first
			if !kubecontainer.RestartsOnFailure(c, &pod.Spec) { // a sidecar's is Always
				a.KillPod, a.InitContainersToStart = true, nil
				return false
			}
			kill(cs, c, schemas.ReasonUnknown, fmt.Sprintf("Init container is in %q state, try killing it before restart", cs.State))
			toStart = append(toStart, i)
		}
		previouslyInitialized = true
	}
	if !previouslyInitialized {
		// Nothing ran yet: the first one.
		toStart = append(toStart, 0)
	}
	slices.Reverse(toStart)
	a.InitContainersToStart = append(a.InitContainersToStart, toStart...)
	return initialized
}
