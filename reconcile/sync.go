package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas"
)

// SyncPod brings the runtime's pod to the spec, in kubelet's steps, and
// returns one result per action taken. status is what GetPodStatus returned
// just before.
func (m *Manager) SyncPod(ctx context.Context, pod *corev1.Pod, status *PodStatus) PodSyncResult {
	var result PodSyncResult
	if status == nil {
		status = &PodStatus{UID: string(pod.UID), Name: pod.Name, Namespace: pod.Namespace}
	}
	ref := podRefOf(pod)

	// Step 1: compute the plan.
	actions := ComputePodActions(pod, status, Probes{Liveness: m.cfg.Liveness, Startup: m.cfg.Startup})
	if e := m.log.Debug(); e.Enabled() { // the arguments allocate even when the event is dropped
		e.Str("pod", pod.Namespace+"/"+pod.Name).Str("uid", string(pod.UID)).Stringer("actions", actions).Msg("computed pod actions")
	}

	// Step 2: kill the pod when its sandbox changes or nothing is left to run.
	if actions.KillPod {
		message := "All containers of the pod are dead"
		if actions.CreateSandbox {
			message = "Pod sandbox changed, it will be killed and re-created"
		}
		kill := m.killPod(ctx, pod, ref, status, nil, schemas.ReasonUnknown, message)
		result.merge(kill)
		if kill.Error() != nil {
			return result
		}
		if actions.CreateSandbox {
			m.purgeInitContainers(ctx, pod, ref, status)
		}
	} else {
		// Step 3: kill the containers that are not to keep (instances of
		// status: the plan was made from it).
		for _, k := range actions.ContainersToKill {
			if err := m.killContainer(ctx, pod, ref, status.FindContainerStatusByID(k.ID), k.Container, k.Reason, k.Message, nil); err != nil {
				result.fail(schemas.ActionKillContainer, k.Name, ErrKillContainer, err.Error())
				return result
			}
			result.add(schemas.ActionKillContainer, k.Name).Message = k.Message
		}
	}

	// Step 4: keep only the newest exited instance of each init container.
	m.pruneInitContainersBeforeStart(ctx, pod, ref, status)

	net := podNetwork{podIPs: status.IPs}

	// Step 5: create the sandbox.
	sandboxID := actions.SandboxID
	if actions.CreateSandbox {
		cfg := m.generateSandboxConfig(pod, actions.Attempt)
		if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
			result.fail(schemas.ActionCreatePodSandbox, string(pod.UID), ErrCreatePodSandbox, fmt.Sprintf("create log directory: %v", err))
			return result
		}
		id, err := m.rt.RunPodSandbox(ctx, cfg, defaultRuntimeHandler)
		if err != nil {
			result.fail(schemas.ActionCreatePodSandbox, string(pod.UID), ErrCreatePodSandbox, fmt.Sprintf("Failed to create pod sandbox: %v", err))
			return result
		}
		sandboxID = id
		result.add(schemas.ActionCreatePodSandbox, string(pod.UID)).Message = id
		m.sandboxEvent(ctx, ref, schemas.EventSandboxCreated, id, actions.Attempt, "")
		resp, err := m.rt.PodSandboxStatus(ctx, id, false)
		if err != nil {
			result.SyncError = fmt.Errorf("%w: sandbox %s: %v", ErrPodSandboxStatus, id, err)
			return result
		}
		if !pod.Spec.HostNetwork {
			net.podIPs = podIPs(resp.GetStatus())
		}
	}
	if len(net.podIPs) > 0 {
		net.podIP = net.podIPs[0]
	}
	if actions.NextInitContainerToStart == nil && len(actions.ContainersToStart) == 0 {
		return result
	}

	// The sandbox config containers are created with (attempt 0, as kubelet).
	sandboxCfg := m.generateSandboxConfig(pod, 0)

	// Step 6: start the next init container; app containers wait for it.
	if c := actions.NextInitContainerToStart; c != nil {
		if err := m.start(ctx, pod, ref, status, c, sandboxID, sandboxCfg, net, true, &result); err != nil {
			return result
		}
		return result
	}

	// Step 7: start the app containers.
	for _, i := range actions.ContainersToStart {
		_ = m.start(ctx, pod, ref, status, &pod.Spec.Containers[i], sandboxID, sandboxCfg, net, false, &result)
	}
	return result
}

// backOffKey identifies a container's restart back-off: pod name, namespace,
// uid, container name and spec hash, as kubelet's getStableKey (a new spec
// starts a new back-off).
func backOffKey(pod *corev1.Pod, c *corev1.Container) string {
	return strings.Join([]string{pod.Name, pod.Namespace, string(pod.UID), c.Name, HashContainer(c)}, "_")
}

// doBackOff says whether the container must wait before its next restart:
// measured from the finish of its newest exited instance.
func (m *Manager) doBackOff(ctx context.Context, pod *corev1.Pod, ref podRef, c *corev1.Container, status *PodStatus) (bool, string) {
	var dead *ContainerStatus
	for _, cs := range status.ContainerStatuses {
		if cs.Name == c.Name && cs.State == ContainerExited {
			dead = cs
			break
		}
	}
	if dead == nil {
		return false, ""
	}
	key := backOffKey(pod, c)
	if m.backOff.IsInBackOffSince(key, dead.FinishedAt) {
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s/%s", m.backOff.Get(key), c.Name, pod.Namespace, pod.Name)
		// Every sync of the period says so again; the id (the instance and
		// its restart count) makes it one stored BackOff per period.
		ev := instanceEvent(m.cfg.NodeName, ref, dead, schemas.EventBackOff, m.cfg.Clock.Now())
		ev.ID, ev.Reason, ev.Message = BackOffEventID(dead), ErrCrashLoopBackOff.Error(), msg
		m.emit.Emit(ctx, ev)
		return true, msg
	}
	m.backOff.Next(key, dead.FinishedAt)
	return false, ""
}

// start is SyncPod's start helper: back-off, then startContainer; it records
// the container's result and the reason of a failure for the status.
func (m *Manager) start(ctx context.Context, pod *corev1.Pod, ref podRef, status *PodStatus, c *corev1.Container, sandboxID string, sandboxCfg *runtimeapi.PodSandboxConfig, net podNetwork, isInit bool, result *PodSyncResult) error {
	action := schemas.ActionStartContainer
	if isInit {
		action = schemas.ActionInitContainer
	}
	if backingOff, msg := m.doBackOff(ctx, pod, ref, c, status); backingOff {
		result.fail(action, c.Name, ErrCrashLoopBackOff, msg)
		m.reasons.set(string(pod.UID), c.Name, ErrCrashLoopBackOff, msg)
		return ErrCrashLoopBackOff
	}
	id, msg, err := m.startContainer(ctx, pod, ref, status, c, sandboxID, sandboxCfg, net, isInit, result)
	if err != nil {
		result.fail(action, c.Name, err, msg)
		m.reasons.set(string(pod.UID), c.Name, err, msg)
		return err
	}
	m.reasons.remove(string(pod.UID), c.Name)
	result.add(action, c.Name).Message = id
	return nil
}

// startContainer pulls the image, creates and starts one instance, as
// kubelet's startContainer. It returns the container id, or a message and
// one of the named errors.
func (m *Manager) startContainer(ctx context.Context, pod *corev1.Pod, ref podRef, status *PodStatus, c *corev1.Container, sandboxID string, sandboxCfg *runtimeapi.PodSandboxConfig, net podNetwork, isInit bool, result *PodSyncResult) (string, string, error) {
	imageRef, msg, err := m.ensureImageExists(ctx, pod, c, sandboxCfg, result)
	if err != nil {
		return "", msg, err
	}

	// The restart count follows the newest instance; without one (all
	// garbage collected, or the runtime lost its state) the log directory
	// says how many ran.
	restartCount := 0
	if cs := status.FindContainerStatusByName(c.Name); cs != nil {
		restartCount = cs.RestartCount + 1
	} else {
		dir := filepath.Join(podLogsDir(m.cfg.LogDir, pod.Namespace, pod.Name, string(pod.UID)), c.Name)
		restartCount = restartCountFromLogDir(dir)
	}

	cfg, err := m.generateContainerConfig(pod, c, restartCount, imageRef, net, isInit)
	if err != nil {
		return "", err.Error(), ErrCreateContainerConfig
	}
	id, err := m.rt.CreateContainer(ctx, sandboxID, cfg, sandboxCfg)
	if err != nil {
		return "", err.Error(), ErrCreateContainer
	}
	m.containerEvent(ctx, ref, schemas.EventContainerCreated, c.Name, id, sandboxID, uint32(restartCount), "", "")
	if err := m.rt.StartContainer(ctx, id); err != nil {
		return "", err.Error(), ErrRunContainer
	}
	m.containerEvent(ctx, ref, schemas.EventContainerStarted, c.Name, id, sandboxID, uint32(restartCount), "", "")
	return id, "", nil
}

// restartCountFromLogDir: one more than the highest N of the N.log files in dir.
func restartCountFromLogDir(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	count := 0
	for _, e := range entries {
		n, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(n); err == nil && i+1 > count {
			count = i + 1
		}
	}
	return count
}

// pruneInitContainersBeforeStart removes every exited (or unknown) instance
// of each init container but the newest.
func (m *Manager) pruneInitContainersBeforeStart(ctx context.Context, pod *corev1.Pod, ref podRef, status *PodStatus) {
	for i := range pod.Spec.InitContainers {
		name := pod.Spec.InitContainers[i].Name
		seen := 0
		for _, cs := range status.ContainerStatuses {
			if cs.Name != name || (cs.State != ContainerExited && cs.State != ContainerUnknown) {
				continue
			}
			seen++
			if seen == 1 {
				continue
			}
			m.removeContainer(ctx, pod.Namespace, pod.Name, ref, cs)
		}
	}
}

// purgeInitContainers removes every instance of every init container: a new
// sandbox runs initialisation again.
func (m *Manager) purgeInitContainers(ctx context.Context, pod *corev1.Pod, ref podRef, status *PodStatus) {
	for i := range pod.Spec.InitContainers {
		for _, cs := range status.ContainerStatuses {
			if cs.Name == pod.Spec.InitContainers[i].Name {
				m.removeContainer(ctx, pod.Namespace, pod.Name, ref, cs)
			}
		}
	}
}

// removeContainer removes an instance and its log file. Errors are logged:
// garbage collection retries.
func (m *Manager) removeContainer(ctx context.Context, namespace, name string, ref podRef, cs *ContainerStatus) {
	if err := m.rt.RemoveContainer(ctx, cs.ID); err != nil && !isNotFound(err) {
		m.log.Warn().Err(err).Str("container", cs.ID).Msg("remove container")
		return
	}
	logFile := filepath.Join(podLogsDir(m.cfg.LogDir, namespace, name, ref.UID), containerLogPath(cs.Name, cs.RestartCount))
	_ = os.Remove(logFile)
	m.containerEvent(ctx, ref, schemas.EventContainerRemoved, cs.Name, cs.ID, cs.SandboxID, cs.Attempt, "", "")
}
