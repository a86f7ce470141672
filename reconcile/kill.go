package reconcile

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas"
)

// KillPod stops the pod: every running container in parallel, each with the
// grace period (gracePeriodOverride, else the pod's deletion or termination
// grace period, else the one recorded on the container, else 30 s; never less
// than 2 s), then every sandbox of the pod. pod may carry metadata only. If
// status is nil, KillPod reads it from the runtime. ContainerKilled events
// carry reason PodDeleted.
func (m *Manager) KillPod(ctx context.Context, pod *corev1.Pod, status *PodStatus, gracePeriodOverride *int64) PodSyncResult {
	if status == nil {
		var err error
		status, err = m.GetPodStatus(ctx, string(pod.UID), pod.Name, pod.Namespace)
		if err != nil {
			return PodSyncResult{SyncError: err}
		}
	}
	return m.killPod(ctx, pod, podRefOf(pod), status, gracePeriodOverride, schemas.ReasonPodDeleted, "Stopping container: pod deleted")
}

// KillOrphan is KillPod for a pod the node has no intent for: its
// ContainerKilled events carry reason Orphaned.
func (m *Manager) KillOrphan(ctx context.Context, pod *corev1.Pod, status *PodStatus, gracePeriodOverride *int64) PodSyncResult {
	return m.killPod(ctx, pod, podRefOf(pod), status, gracePeriodOverride, schemas.ReasonOrphaned, "Stopping container: pod orphaned (no intent wants it)")
}

func (m *Manager) killPod(ctx context.Context, pod *corev1.Pod, ref podRef, status *PodStatus, gracePeriodOverride *int64, reason, message string) PodSyncResult {
	var result PodSyncResult
	running := status.RunningContainers()
	errs := make([]error, len(running))
	var wg sync.WaitGroup
	for i, cs := range running {
		wg.Go(func() {
			errs[i] = m.killContainer(ctx, pod, ref, cs, specOf(pod, cs.Name), reason, message, gracePeriodOverride)
		})
	}
	wg.Wait()
	for i, cs := range running {
		if errs[i] != nil {
			result.fail(schemas.ActionKillContainer, cs.Name, ErrKillContainer, errs[i].Error())
		} else {
			result.add(schemas.ActionKillContainer, cs.Name)
		}
	}

	// Stop every sandbox of the pod; garbage collection removes them.
	var stopErr error
	for _, s := range status.SandboxStatuses {
		if err := m.rt.StopPodSandbox(ctx, s.Id); err != nil && !isNotFound(err) {
			stopErr = fmt.Errorf("stop sandbox %s: %w", s.Id, err)
			continue
		}
		if s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			m.sandboxEvent(ctx, ref, schemas.EventSandboxStopped, s.Id, s.GetMetadata().GetAttempt(), message)
		}
	}
	switch {
	case stopErr != nil:
		result.fail(schemas.ActionKillPodSandbox, ref.UID, ErrKillPodSandbox, stopErr.Error())
	case len(status.SandboxStatuses) > 0:
		result.add(schemas.ActionKillPodSandbox, ref.UID)
	}
	return result
}

// specOf finds the container (app or init) named name in pod, if pod has a spec.
func specOf(pod *corev1.Pod, name string) *corev1.Container {
	if pod == nil {
		return nil
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// gracePeriod for killing one container, after kubelet's killContainer.
func gracePeriod(pod *corev1.Pod, cs *ContainerStatus, spec *corev1.Container, reason string, override *int64) int64 {
	var g int64 = defaultTerminationGracePeriod
	switch {
	case pod != nil && pod.DeletionGracePeriodSeconds != nil:
		g = *pod.DeletionGracePeriodSeconds
	case pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil:
		g = *pod.Spec.TerminationGracePeriodSeconds
	case cs.TerminationGracePeriod > 0:
		g = cs.TerminationGracePeriod
	}
	// A probe may bring its own grace period.
	if spec != nil {
		switch reason {
		case schemas.ReasonLivenessProbe:
			if p := spec.LivenessProbe; p != nil && p.TerminationGracePeriodSeconds != nil {
				g = *p.TerminationGracePeriodSeconds
			}
		case schemas.ReasonStartupProbe:
			if p := spec.StartupProbe; p != nil && p.TerminationGracePeriodSeconds != nil {
				g = *p.TerminationGracePeriodSeconds
			}
		}
	}
	if override != nil {
		g = *override
	}
	return max(g, minimumGracePeriodInSeconds)
}

// killContainer stops one instance with its grace period and emits
// ContainerKilled. Stopping an absent container is success.
func (m *Manager) killContainer(ctx context.Context, pod *corev1.Pod, ref podRef, cs *ContainerStatus, spec *corev1.Container, reason, message string, override *int64) error {
	g := gracePeriod(pod, cs, spec, reason, override)
	if err := m.rt.StopContainer(ctx, cs.ID, g); err != nil && !isNotFound(err) {
		return fmt.Errorf("stop container %s (%s): %w", cs.Name, cs.ID, err)
	}
	m.containerEvent(ctx, ref, schemas.EventContainerKilled, cs.Name, cs.ID, cs.SandboxID, cs.Attempt, reason, message)
	return nil
}
