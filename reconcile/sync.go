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

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime/containerlogs"
	"github.com/jetlet/jetlet/schemas"
)

// podOperation is one SyncPod or KillPod of one pod: what its steps share, set
// once, and the result they record into. Only the sync's goroutine uses it
// (killPod's parallel container kills read a copy).
type podOperation struct {
	m *Kuberuntime
	// pod is the spec; KillPod's may carry metadata only.
	pod    *corev1.Pod
	ref    kubecontainer.PodRef
	status *kubecontainer.PodStatus // the plan's input, read only
	// Where containers start, set by SyncPod once the sandbox exists.
	sandboxID  string
	sandboxCfg *runtimeapi.PodSandboxConfig
	net        podNetwork
	result     kubecontainer.PodSyncResult
}

func (m *Kuberuntime) newPodOperation(pod *corev1.Pod, status *kubecontainer.PodStatus) *podOperation {
	return &podOperation{m: m, pod: pod, ref: podRefOf(pod), status: status}
}

// SyncPod brings the runtime's pod to the spec, in kubelet's steps, and
// returns one result per action taken. status is what GetPodStatus returned
// just before.
func (m *Kuberuntime) SyncPod(ctx context.Context, pod *corev1.Pod, status *kubecontainer.PodStatus) kubecontainer.PodSyncResult {
	if status == nil {
		status = &kubecontainer.PodStatus{UID: string(pod.UID), Name: pod.Name, Namespace: pod.Namespace}
	}
	s := m.newPodOperation(m.withDefaultHostUsers(pod, status), status)
	s.sync(ctx)
	return s.result
}

func (s *podOperation) sync(ctx context.Context) {
	m, pod := s.m, s.pod

	// Step 1: compute the plan.
	actions := ComputePodActions(pod, s.status, Probes{Liveness: m.cfg.Liveness, Startup: m.cfg.Startup})
	actions.UpdatePodResources = m.planPodResize(pod, actions)
	if e := m.log.Debug(); e.Enabled() { // the arguments allocate even when the event is dropped
		e.Str("pod", pod.Namespace+"/"+pod.Name).Str("uid", string(pod.UID)).Stringer("actions", actions).Msg("computed pod actions")
	}

	// Step 1b (kubelet's volume manager, before its sync): write the volumes
	// of API data of a pod that goes on running; one never written holds
	// everything back.
	if (!actions.KillPod || actions.CreateSandbox) && pod.DeletionTimestamp == nil && !s.mountVolumes(ctx) {
		return
	}

	// Step 1c (kubelet's syncPod): the pod's cgroup, for what will run.
	if (!actions.KillPod || actions.CreateSandbox) && pod.DeletionTimestamp == nil && !s.ensurePodCgroup(ctx) {
		return
	}

	// Step 2: kill the pod when its sandbox changes or nothing is left to run.
	if actions.KillPod {
		message := "All containers of the pod are dead"
		if actions.CreateSandbox {
			message = "Pod sandbox changed, it will be killed and re-created"
		}
		if !s.killPod(ctx, killing{reason: schemas.ReasonUnknown, message: message}) {
			return
		}
		if actions.CreateSandbox {
			s.purgeInitContainers(ctx)
		}
	} else {
		// Step 3: kill the containers that are not to keep (instances of
		// status: the plan was made from it).
		for _, k := range actions.ContainersToKill {
			cs := s.status.FindContainerStatusByID(k.ID)
			if err := s.killContainer(ctx, cs, k.Container, killing{reason: k.Reason, message: k.Message}); err != nil {
				s.result.Fail(schemas.ActionKillContainer, k.Name, kubecontainer.ErrKillContainer, err.Error())
				return
			}
			s.result.Add(schemas.ActionKillContainer, k.Name, k.Message)
		}
	}

	// Step 4: keep only the newest exited instance of each init container.
	s.pruneInitContainersBeforeStart(ctx)

	s.net = podNetwork{podIPs: s.status.IPs}

	// Step 5: create the sandbox.
	s.sandboxID = actions.SandboxID
	if actions.CreateSandbox {
		cfg, dnsWarnings, err := m.generateSandboxConfig(pod, actions.Attempt)
		if err != nil {
			s.result.Fail(schemas.ActionCreatePodSandbox, s.ref.UID, kubecontainer.ErrCreatePodSandbox, fmt.Sprintf("Failed to generate sandbox config for pod %q: %v", pod.Namespace+"/"+pod.Name, err))
			return
		}
		if err := os.MkdirAll(cfg.LogDirectory, 0o755); err != nil {
			s.result.Fail(schemas.ActionCreatePodSandbox, s.ref.UID, kubecontainer.ErrCreatePodSandbox, fmt.Sprintf("create log directory: %v", err))
			return
		}
		id, err := m.rt.RunPodSandbox(ctx, cfg, defaultRuntimeHandler)
		if err != nil {
			s.result.Fail(schemas.ActionCreatePodSandbox, s.ref.UID, kubecontainer.ErrCreatePodSandbox, fmt.Sprintf("Failed to create pod sandbox: %v", err))
			return
		}
		s.sandboxID = id
		s.result.Add(schemas.ActionCreatePodSandbox, s.ref.UID, id)
		if err := m.recordPodResources(s.ref.UID, id, cfg.Linux.Resources); err != nil {
			m.log.Warn().Err(err).Str("uid", s.ref.UID).Msg("the pod cgroup's resources are not recorded: its pod-level resources are not resized in place")
		}
		m.sandboxEvent(ctx, s.ref, schemas.EventSandboxCreated, id, actions.Attempt, "")
		for _, w := range dnsWarnings {
			m.dnsEvent(ctx, s.ref, id, w)
		}
		resp, err := m.rt.PodSandboxStatus(ctx, id, false)
		if err != nil {
			s.result.SyncError = fmt.Errorf("%w: sandbox %s: %v", kubecontainer.ErrPodSandboxStatus, id, err)
			return
		}
		s.net.podIPs = podIPs(resp.GetStatus(), m.cfg.NodeIP)
	}
	if len(s.net.podIPs) > 0 {
		s.net.podIP = s.net.podIPs[0]
	}
	if len(actions.InitContainersToStart) > 0 || len(actions.ContainersToStart) > 0 {
		// The sandbox config containers are created with (attempt 0, as kubelet).
		sandboxCfg, _, err := m.generateSandboxConfig(pod, 0)
		if err != nil {
			s.result.SyncError = fmt.Errorf("%w: %v", kubecontainer.ErrCreatePodSandbox, err)
			return
		}
		s.sandboxCfg = sandboxCfg
	}

	// Step 6: start the init containers: the next one to run and the
	// sidecars to restart. A sidecar that fails to start does not hold the
	// others back; an init container that fails ends the sync.
	for _, i := range actions.InitContainersToStart {
		c := &pod.Spec.InitContainers[i]
		if !s.start(ctx, c, true) && !kubecontainer.IsSidecar(c) {
			return
		}
	}

	// Step 7: resize the running containers and the pod cgroup in place.
	s.resize(ctx, actions.ContainersToUpdate, actions.UpdatePodResources)

	// Step 8: start the app containers.
	for _, i := range actions.ContainersToStart {
		s.start(ctx, &pod.Spec.Containers[i], false)
	}
}

// backOffKey identifies a container's restart back-off: pod name, namespace,
// uid, container name and spec hash, as kubelet's getStableKey (a new spec
// starts a new back-off).
func backOffKey(pod *corev1.Pod, c *corev1.Container) string {
	return strings.Join([]string{pod.Name, pod.Namespace, string(pod.UID), c.Name, HashContainer(c)}, "_")
}

// doBackOff says whether the container must wait before its next restart:
// measured from the finish of its newest exited instance.
func (s *podOperation) doBackOff(ctx context.Context, c *corev1.Container) (bool, string) {
	m, pod := s.m, s.pod
	var dead *kubecontainer.ContainerStatus
	for _, cs := range s.status.ContainerStatuses {
		if cs.Name == c.Name && cs.State == kubecontainer.ContainerExited {
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
		ev := kubecontainer.InstanceEvent(m.cfg.NodeName, s.ref, kubecontainer.InstanceOf(dead), schemas.EventBackOff, m.cfg.Clock.Now())
		ev.ID, ev.Reason, ev.Message = kubecontainer.BackOffEventID(dead), kubecontainer.ErrCrashLoopBackOff.Error(), msg
		m.emit.Emit(ctx, ev)
		return true, msg
	}
	m.backOff.Next(key, dead.FinishedAt)
	return false, ""
}

// start is SyncPod's start helper: back-off, then startContainer; it records
// the container's result and the reason of a failure for the status, and
// reports whether the container started.
func (s *podOperation) start(ctx context.Context, c *corev1.Container, isInit bool) bool {
	action := schemas.ActionStartContainer
	if isInit {
		action = schemas.ActionInitContainer
	}
	uid := s.ref.UID
	if backingOff, msg := s.doBackOff(ctx, c); backingOff {
		s.result.Fail(action, c.Name, kubecontainer.ErrCrashLoopBackOff, msg)
		s.m.reasons.set(uid, c.Name, kubecontainer.ErrCrashLoopBackOff, msg)
		return false
	}
	id, msg, err := s.startContainer(ctx, c, isInit)
	if err != nil {
		s.result.Fail(action, c.Name, err, msg)
		s.m.reasons.set(uid, c.Name, err, msg)
		return false
	}
	s.m.reasons.remove(uid, c.Name)
	s.result.Add(action, c.Name, id)
	return true
}

// startContainer pulls the image, creates and starts one instance, as
// kubelet's startContainer. It returns the container id, or a message and
// one of the named errors.
func (s *podOperation) startContainer(ctx context.Context, c *corev1.Container, isInit bool) (string, string, error) {
	m, pod := s.m, s.pod
	imageRef, msg, err := s.ensureImageExists(ctx, c)
	if err != nil {
		return "", msg, err
	}

	// The restart count follows the newest instance; without one (all
	// garbage collected, or the runtime lost its state) the log directory
	// says how many ran.
	restartCount := 0
	if cs := s.status.FindContainerStatusByName(c.Name); cs != nil {
		restartCount = cs.RestartCount + 1
	} else {
		dir := filepath.Join(podLogsDir(m.cfg.LogDir, pod.Namespace, pod.Name, string(pod.UID)), c.Name)
		restartCount = restartCountFromLogDir(dir)
	}

	cfg, err := m.generateContainerConfig(ctx, pod, c, restartCount, imageRef, s.net, isInit)
	if err != nil {
		return "", err.Error(), kubecontainer.ErrCreateContainerConfig
	}
	id, err := m.rt.CreateContainer(ctx, s.sandboxID, cfg, s.sandboxCfg)
	if err != nil {
		return "", err.Error(), kubecontainer.ErrCreateContainer
	}
	in := kubecontainer.Instance{Container: c.Name, ID: id, SandboxID: s.sandboxID, Attempt: uint32(restartCount)}
	m.containerEvent(ctx, s.ref, in, schemas.EventContainerCreated, "", "")
	if err := m.rt.StartContainer(ctx, id); err != nil {
		return "", err.Error(), kubecontainer.ErrRunContainer
	}
	m.containerEvent(ctx, s.ref, in, schemas.EventContainerStarted, "", "")
	started := &kubecontainer.ContainerStatus{ID: id, Name: c.Name, SandboxID: s.sandboxID, Attempt: in.Attempt, RestartCount: restartCount}
	if msg := s.runPostStart(ctx, started, c); msg != "" {
		return "", msg, kubecontainer.ErrPostStartHook
	}
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
func (s *podOperation) pruneInitContainersBeforeStart(ctx context.Context) {
	for i := range s.pod.Spec.InitContainers {
		name := s.pod.Spec.InitContainers[i].Name
		seen := 0
		for _, cs := range s.status.ContainerStatuses {
			if cs.Name != name || (cs.State != kubecontainer.ContainerExited && cs.State != kubecontainer.ContainerUnknown) {
				continue
			}
			seen++
			if seen == 1 {
				continue
			}
			s.removeContainer(ctx, cs)
		}
	}
}

// purgeInitContainers removes every instance of every init container: a new
// sandbox runs initialisation again.
func (s *podOperation) purgeInitContainers(ctx context.Context) {
	for i := range s.pod.Spec.InitContainers {
		for _, cs := range s.status.ContainerStatuses {
			if cs.Name == s.pod.Spec.InitContainers[i].Name {
				s.removeContainer(ctx, cs)
			}
		}
	}
}

// removeContainer removes an instance and its log file. Errors are logged:
// garbage collection retries.
func (s *podOperation) removeContainer(ctx context.Context, cs *kubecontainer.ContainerStatus) {
	m := s.m
	if err := m.rt.RemoveContainer(ctx, cs.ID); err != nil && !isNotFound(err) {
		m.log.Warn().Err(err).Str("container", cs.ID).Msg("remove container")
		return
	}
	logFile := filepath.Join(podLogsDir(m.cfg.LogDir, s.ref.Namespace, s.ref.Name, s.ref.UID), containerLogPath(cs.Name, cs.RestartCount))
	_ = containerlogs.Remove(logFile)
	_ = os.Remove(m.terminationMessageFile(s.ref.UID, cs.Name, cs.RestartCount))
	m.containerEvent(ctx, s.ref, kubecontainer.InstanceOf(cs), schemas.EventContainerRemoved, "", "")
}
