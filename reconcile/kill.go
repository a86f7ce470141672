package reconcile

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// KillPod stops the pod: every running container in parallel, each with the
// grace period (gracePeriodOverride, else the pod's deletion or termination
// grace period, else the one recorded on the container, else 30 s; never less
// than 2 s), then every sandbox of the pod. pod may carry metadata only. If
// status is nil, KillPod reads it from the runtime. ContainerKilled events
// carry reason PodDeleted.
func (m *Kuberuntime) KillPod(ctx context.Context, pod *corev1.Pod, status *kubecontainer.PodStatus, gracePeriodOverride *int64) kubecontainer.PodSyncResult {
	if status == nil {
		var err error
		status, err = m.GetPodStatus(ctx, string(pod.UID), pod.Name, pod.Namespace)
		if err != nil {
			return kubecontainer.PodSyncResult{SyncError: err}
		}
	}
	s := m.newPodOperation(pod, status)
	s.killPod(ctx, killing{reason: schemas.ReasonPodDeleted, message: "Stopping container: pod deleted", gracePeriodOverride: gracePeriodOverride})
	return s.result
}

// KillOrphan is KillPod for a pod the node has no intent for: its
// ContainerKilled events carry reason Orphaned.
func (m *Kuberuntime) KillOrphan(ctx context.Context, pod *corev1.Pod, status *kubecontainer.PodStatus, gracePeriodOverride *int64) kubecontainer.PodSyncResult {
	s := m.newPodOperation(pod, status)
	s.killPod(ctx, killing{reason: schemas.ReasonOrphaned, message: "Stopping container: pod orphaned (no intent wants it)", gracePeriodOverride: gracePeriodOverride})
	return s.result
}

// KillPastDeadline is KillPod for a pod that ran past its
// activeDeadlineSeconds: its ContainerKilled events carry reason
// DeadlineExceeded.
func (m *Kuberuntime) KillPastDeadline(ctx context.Context, pod *corev1.Pod, status *kubecontainer.PodStatus) kubecontainer.PodSyncResult {
	s := m.newPodOperation(pod, status)
	s.killPod(ctx, killing{reason: schemas.ReasonDeadlineExceeded, message: "Pod was active on the node longer than the specified deadline"})
	return s.result
}

// KillEvicted is KillPod for a pod ended for good, by the eviction manager
// to relieve node pressure (reason Evicted) or by the node's shutdown
// (reason Terminated): its ContainerKilled events carry reason and message;
// grace replaces the pod's grace period.
func (m *Kuberuntime) KillEvicted(ctx context.Context, pod *corev1.Pod, status *kubecontainer.PodStatus, reason, message string, grace int64) kubecontainer.PodSyncResult {
	s := m.newPodOperation(pod, status)
	s.killPod(ctx, killing{reason: reason, message: message, gracePeriodOverride: &grace})
	return s.result
}

// killing says why containers are stopped and how long they may take.
type killing struct {
	// reason and message of the ContainerKilled events.
	reason, message string
	// gracePeriodOverride, if set, replaces the pod's and the container's.
	gracePeriodOverride *int64
	// order, when the whole pod is killed, holds sidecars back until the
	// containers they serve have stopped.
	order *terminationOrdering
}

// killPod stops the running containers in parallel (sidecars after the app
// containers and after the sidecars that follow them), then every sandbox,
// and records each; it reports whether all of them stopped.
func (s *podOperation) killPod(ctx context.Context, k killing) (stopped bool) {
	running := s.status.RunningContainers()
	k.order = newTerminationOrdering(s.pod, running)
	errs := make([]error, len(running))
	// The kills read a copy of s: goroutines capturing s itself would put
	// every sync's podOperation on the heap, the no-op ones too.
	kills := *s
	var wg sync.WaitGroup
	for i, cs := range running {
		wg.Go(func() {
			errs[i] = kills.killContainer(ctx, cs, specOf(kills.pod, cs.Name), k)
		})
	}
	wg.Wait()
	stopped = true
	for i, cs := range running {
		if errs[i] != nil {
			s.result.Fail(schemas.ActionKillContainer, cs.Name, kubecontainer.ErrKillContainer, errs[i].Error())
			stopped = false
		} else {
			s.result.Add(schemas.ActionKillContainer, cs.Name, "")
		}
	}

	// Stop every sandbox of the pod; garbage collection removes them.
	var stopErr error
	for _, sb := range s.status.SandboxStatuses {
		if err := s.m.rt.StopPodSandbox(ctx, sb.Id); err != nil && !isNotFound(err) {
			stopErr = fmt.Errorf("stop sandbox %s: %w", sb.Id, err)
			continue
		}
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			s.m.sandboxEvent(ctx, s.ref, schemas.EventSandboxStopped, sb.Id, sb.GetMetadata().GetAttempt(), k.message)
		}
	}
	switch {
	case stopErr != nil:
		s.result.Fail(schemas.ActionKillPodSandbox, s.ref.UID, kubecontainer.ErrKillPodSandbox, stopErr.Error())
		stopped = false
	case len(s.status.SandboxStatuses) > 0:
		s.result.Add(schemas.ActionKillPodSandbox, s.ref.UID, "")
	}
	return stopped
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
func gracePeriod(pod *corev1.Pod, cs *kubecontainer.ContainerStatus, spec *corev1.Container, k killing) int64 {
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
		switch k.reason {
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
	if k.gracePeriodOverride != nil {
		g = *k.gracePeriodOverride
	}
	return max(g, minimumGracePeriodInSeconds)
}

// killContainer stops one instance (spec: its container's, if the pod has
// it) with its grace period and emits ContainerKilled. Stopping an absent
// container is success.
func (s *podOperation) killContainer(ctx context.Context, cs *kubecontainer.ContainerStatus, spec *corev1.Container, k killing) error {
	g := gracePeriod(s.pod, cs, spec, k)
	// The preStop hook and the wait for the containers a sidecar serves run
	// inside the grace period; the stop gets what is left, never less than
	// the minimum.
	g -= s.runPreStop(ctx, cs, spec, g)
	if k.order != nil {
		defer k.order.stopped(cs.Name)
		if g > 0 {
			g -= k.order.waitForTurn(cs.Name, g)
		}
	}
	g = max(g, minimumGracePeriodInSeconds)
	if err := s.m.rt.StopContainer(ctx, cs.ID, g); err != nil && !isNotFound(err) && !s.m.exited(ctx, cs.ID) {
		return fmt.Errorf("stop container %s (%s): %w", cs.Name, cs.ID, err)
	}
	s.m.containerEvent(ctx, s.ref, kubecontainer.InstanceOf(cs), schemas.EventContainerKilled, k.reason, k.message)
	return nil
}

// exited reports whether the container has exited (or is gone): a stop that
// failed because the container exited on its own meanwhile (containerd's
// "ttrpc: closed" when the task ends under the stop) has done its work.
func (m *Kuberuntime) exited(ctx context.Context, id string) bool {
	resp, err := m.rt.ContainerStatus(ctx, id, false)
	if err != nil {
		return isNotFound(err)
	}
	return resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED
}

// terminationOrdering makes each sidecar of a pod being killed wait for the
// app containers and for the sidecars after it in the spec, as kubelet's
// terminationOrdering: a sidecar outlives what it serves.
type terminationOrdering struct {
	// stoppedCh of a container is closed once its instances have stopped
	// (at once for one that does not run); the maps are not written after
	// newTerminationOrdering.
	stoppedCh map[string]chan struct{}
	once      map[string]*sync.Once
	prereqs   map[string][]chan struct{}
}

// newTerminationOrdering returns nil for a pod without sidecars.
func newTerminationOrdering(pod *corev1.Pod, running []*kubecontainer.ContainerStatus) *terminationOrdering {
	if pod == nil || !hasSidecar(pod) {
		return nil
	}
	o := &terminationOrdering{stoppedCh: map[string]chan struct{}{}, once: map[string]*sync.Once{}, prereqs: map[string][]chan struct{}{}}
	runs := map[string]bool{}
	for _, cs := range running {
		runs[cs.Name] = true
	}
	add := func(name string) chan struct{} {
		ch := make(chan struct{})
		o.stoppedCh[name], o.once[name] = ch, &sync.Once{}
		if !runs[name] {
			close(ch)
		}
		return ch
	}
	var apps []chan struct{}
	for i := range pod.Spec.Containers {
		apps = append(apps, add(pod.Spec.Containers[i].Name))
	}
	var later chan struct{} // the stop of the next sidecar in the spec
	for i := len(pod.Spec.InitContainers) - 1; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		ch := add(c.Name)
		if !kubecontainer.IsSidecar(c) {
			continue
		}
		o.prereqs[c.Name] = append(o.prereqs[c.Name], apps...)
		if later != nil {
			o.prereqs[c.Name] = append(o.prereqs[c.Name], later)
		}
		later = ch
	}
	return o
}

// waitForTurn waits, at most grace seconds, until what the container must
// outlive has stopped; it returns the whole seconds waited.
func (o *terminationOrdering) waitForTurn(name string, grace int64) int64 {
	start := time.Now()
	deadline := time.NewTimer(time.Duration(grace) * time.Second)
	defer deadline.Stop()
	for _, ch := range o.prereqs[name] {
		select {
		case <-ch:
		case <-deadline.C:
			return int64(time.Since(start) / time.Second)
		}
	}
	return int64(time.Since(start) / time.Second)
}

// stopped records that the container's instance has stopped (or failed to).
func (o *terminationOrdering) stopped(name string) {
	if once, ok := o.once[name]; ok {
		once.Do(func() { close(o.stoppedCh[name]) })
	}
}
