package reconcile

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// PlanPod says what SyncPod would do to pod now, given its runtime status
// and previous, the pod the node applied last (nil when none): the plan
// ComputePodActions makes, each step with kubelet's reason, the fields whose
// change restarts a container, and the starts the crash-loop back-off holds.
// It acts on nothing and records nothing: the same inputs give the same plan
// as the sync's own.
func (m *Kuberuntime) PlanPod(pod *corev1.Pod, status *kubecontainer.PodStatus, previous *corev1.Pod) (plan schemas.PodPlan) {
	if status == nil {
		status = &kubecontainer.PodStatus{}
	}
	pod = m.withDefaultHostUsers(pod, status)
	a := ComputePodActions(pod, status, Probes{Liveness: m.cfg.Liveness, Startup: m.cfg.Startup})
	a.UpdatePodResources = m.planPodResize(pod, a)
	plan.Sandbox = sandboxStep(a, status)
	kills := map[string]ContainerToKill{}
	for _, k := range a.ContainersToKill {
		kills[k.Name] = k
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		plan.Containers = append(plan.Containers, m.containerStep(pod, status, previous, a, kills, c, true, slices.Contains(a.InitContainersToStart, i)))
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		plan.Containers = append(plan.Containers, m.containerStep(pod, status, previous, a, kills, c, false, slices.Contains(a.ContainersToStart, i)))
	}
	return plan
}

// sandboxStep is the sandbox's part of a plan, with SyncPod's own messages;
// a resize of its pod cgroup (pod-level resources) is its resize.
func sandboxStep(a PodActions, status *kubecontainer.PodStatus) schemas.PlanStep {
	switch {
	case a.UpdatePodResources != nil:
		u := a.UpdatePodResources
		return schemas.PlanStep{Action: schemas.PlanResize, Fields: []string{"resources"},
			Message: "pod " + podResourcesString(u.Current) + " -> " + podResourcesString(u.Desired)}
	case a.CreateSandbox && len(status.SandboxStatuses) == 0:
		return schemas.PlanStep{Action: schemas.PlanCreate, Message: "the pod has no sandbox yet"}
	case a.CreateSandbox:
		return schemas.PlanStep{Action: schemas.PlanRecreate, Reason: schemas.ReasonUnknown, Message: "Pod sandbox changed, it will be killed and re-created"}
	case a.KillPod:
		return schemas.PlanStep{Action: schemas.PlanKill, Message: "All containers of the pod are dead"}
	}
	return schemas.PlanStep{Action: schemas.PlanKeep}
}

// containerStep is one container's part of a plan.
func (m *Kuberuntime) containerStep(pod *corev1.Pod, status *kubecontainer.PodStatus, previous *corev1.Pod, a PodActions,
	kills map[string]ContainerToKill, c *corev1.Container, isInit, starts bool) schemas.PlanStep {
	step := schemas.PlanStep{Name: c.Name, Init: isInit}
	cs := status.FindContainerStatusByName(c.Name)
	running := cs != nil && cs.State == kubecontainer.ContainerRunning
	k, killed := kills[c.Name]
	switch {
	case a.KillPod && running:
		// The whole pod goes: with the sandbox, or because nothing is
		// left to run.
		step.Action, step.Reason, step.Message = schemas.PlanKill, schemas.ReasonUnknown, sandboxStep(a, status).Message
		if starts {
			step.Action = schemas.PlanRestart
		}
	case killed:
		step.Action, step.Reason, step.Message = schemas.PlanKill, k.Reason, k.Message
		if starts {
			step.Action = schemas.PlanRestart
		}
		if k.Reason == schemas.ReasonSpecChanged {
			step.Fields = changedFields(previousContainer(previous, c.Name, isInit), c)
		}
	case starts:
		step.Action = schemas.PlanStart
		if until, ok := m.backOffUntil(pod, status, c); ok {
			step.Reason, step.BackOffUntil = kubecontainer.ErrCrashLoopBackOff.Error(), &until
			step.Message = "back-off " + m.backOff.Get(backOffKey(pod, c)).String() + " restarting failed container=" + c.Name + " pod=" + pod.Namespace + "/" + pod.Name
		}
	case running:
		step.Action = schemas.PlanKeep
		if msg, ok := resizeStepMessage(a, c.Name); ok {
			step.Action, step.Message, step.Fields = schemas.PlanResize, msg, []string{"resources"}
		}
	case !isInit && (a.CreateSandbox || len(a.InitContainersToStart) > 0) && len(pod.Spec.InitContainers) > 0:
		step.Action, step.Message = schemas.PlanWait, "after the init containers"
	default:
		step.Action = schemas.PlanNone
	}
	return step
}

// resizeStepMessage says how the plan resizes container name in place, per
// resource ("memory limit 128Mi, cpu 50m/200m -> memory limit 256Mi, ..."),
// if it does.
func resizeStepMessage(a PodActions, name string) (string, bool) {
	for _, r := range resizeOrder {
		for _, u := range a.ContainersToUpdate[r] {
			if u.Name == name {
				return u.Current.String() + " -> " + u.Desired.String(), true
			}
		}
	}
	return "", false
}

// backOffUntil is when the crash-loop back-off lets c start again, if it
// holds it now: doBackOff's test, without its side effects.
func (m *Kuberuntime) backOffUntil(pod *corev1.Pod, status *kubecontainer.PodStatus, c *corev1.Container) (until time.Time, ok bool) {
	for _, cs := range status.ContainerStatuses {
		if cs.Name == c.Name && cs.State == kubecontainer.ContainerExited {
			key := backOffKey(pod, c)
			if m.backOff.IsInBackOffSince(key, cs.FinishedAt) {
				return cs.FinishedAt.Add(m.backOff.Get(key)), true
			}
			return time.Time{}, false
		}
	}
	return time.Time{}, false
}

// previousContainer is the container called name of the pod applied before,
// or nil.
func previousContainer(previous *corev1.Pod, name string, isInit bool) *corev1.Container {
	if previous == nil {
		return nil
	}
	list := previous.Spec.Containers
	if isInit {
		list = previous.Spec.InitContainers
	}
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// changedFields names the fields of a container's spec (as its JSON has
// them) that differ between was and is: what changed its hash. Nil when was
// is not known.
func changedFields(was, is *corev1.Container) []string {
	if was == nil {
		return nil
	}
	a, b := jsonFields(was), jsonFields(is)
	var out []string
	for _, f := range slices.Sorted(maps.Keys(mergeKeys(a, b))) {
		if !bytes.Equal(a[f], b[f]) {
			out = append(out, f)
		}
	}
	return out
}

func jsonFields(c *corev1.Container) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	b, _ := json.Marshal(c) // a Container always marshals
	_ = json.Unmarshal(b, &m)
	return m
}

func mergeKeys(a, b map[string]json.RawMessage) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}
