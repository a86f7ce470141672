package podworkers

import (
	"context"
	"errors"
	"reflect"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// podSync is one sync of one pod to its desired state: kubelet's syncPod
// over reconcile.Kuberuntime, reading the pod's status from the relist's cache
// so that a sync of a converged pod asks the runtime nothing.
type podSync struct {
	w      *Workers
	p      *pod
	want   Desired
	orphan bool // want deletes a pod no intent wants
}

func (s *podSync) run(ctx context.Context) Report {
	if s.want.Intent.Op == schemas.OpDelete {
		return s.delete(ctx)
	}
	mgr, pod := s.w.mgr, s.want.Intent.Pod
	status, err := s.status(ctx)
	if err != nil {
		return Report{Actions: []schemas.ActionResult{}, Err: err}
	}
	if s.p.startTime.IsZero() {
		s.p.startTime = startTime(status)
	}
	api := mgr.ToAPIStatus(pod, status)
	if s.p.evicted != nil {
		return s.endForGood(ctx, status, s.p.evicted.reason, s.p.evicted.message, func(status *kubecontainer.PodStatus) kubecontainer.PodSyncResult {
			return mgr.KillEvicted(ctx, pod, status, s.p.evicted.reason, s.p.evicted.message, s.p.evicted.grace)
		})
	}
	if at, ok := s.p.activeDeadline(); ok && !time.Now().Before(at) && !(isTerminal(api.Phase) && exitedBefore(status, at)) {
		// A pod that finished before its deadline keeps its phase.
		return s.endForGood(ctx, status, schemas.ReasonDeadlineExceeded, "", func(status *kubecontainer.PodStatus) kubecontainer.PodSyncResult {
			return mgr.KillPastDeadline(ctx, pod, status)
		})
	}
	if isTerminal(api.Phase) && !sandboxReady(status) {
		// Finished for good, as kubelet's terminated pods: nothing restarts.
		s.w.cfg.Prober.UpdatePod(pod, status)
		return Report{Actions: []schemas.ActionResult{}, Status: s.decorate(api)}
	}
	res := mgr.SyncPod(ctx, pod, status)
	if changedRuntime(res) {
		// Read back what the sync did, so that the next sync needs no relist.
		at := time.Now()
		if fresh, err := mgr.GetPodStatus(ctx, s.want.UID, pod.Name, pod.Namespace); err == nil {
			s.w.cache.Store(s.want.UID, fresh, at)
			status = fresh
		}
	}
	// The prober follows what runs now: a new instance gets its probes, a
	// stopped one loses them.
	s.w.cfg.Prober.UpdatePod(pod, status)
	if len(res.Actions) > 0 {
		// Only an action changes what the status says (the runtime, or a
		// container's waiting reason); a no-op sync reuses it.
		api = mgr.ToAPIStatus(pod, status)
	}
	return Report{Actions: res.ActionResults(), Err: res.Error(), Status: s.decorate(api)}
}

// statusOnly is the pod's status from the cache and the probe results,
// without a sync; nil for a pod being deleted or past its active deadline, or
// whose status cannot be read now (the next sync writes it).
func (s *podSync) statusOnly(ctx context.Context) *schemas.PodStatus {
	if s.want.Intent.Op == schemas.OpDelete {
		return nil
	}
	if at, ok := s.p.activeDeadline(); s.p.evicted != nil || ok && !time.Now().Before(at) {
		return nil // evicted or past its deadline: the sync says Failed and why
	}
	status, err := s.status(ctx)
	if err != nil {
		return nil
	}
	return s.decorate(s.w.mgr.ToAPIStatus(s.want.Intent.Pod, status))
}

// endForGood ends a pod with kill, as kubelet's active deadline handler and
// eviction manager do: whatever runs is killed, and the pod is Failed with
// reason (and message) for good; nothing restarts.
func (s *podSync) endForGood(ctx context.Context, status *kubecontainer.PodStatus, reason, message string, kill func(*kubecontainer.PodStatus) kubecontainer.PodSyncResult) Report {
	mgr, pod := s.w.mgr, s.want.Intent.Pod
	rep := Report{Actions: []schemas.ActionResult{}}
	if sandboxReady(status) || len(status.RunningContainers()) > 0 {
		killed := kill(status)
		rep.Actions, rep.Err = killed.ActionResults(), killed.Error()
		at := time.Now()
		if fresh, err := mgr.GetPodStatus(ctx, s.want.UID, pod.Name, pod.Namespace); err == nil {
			s.w.cache.Store(s.want.UID, fresh, at)
			status = fresh
		}
	}
	s.w.cfg.Prober.UpdatePod(pod, status) // what was killed is probed no more
	rep.Status = s.decorate(mgr.ToAPIStatus(pod, status))
	rep.Status.Phase, rep.Status.Reason, rep.Status.Message = schemas.PhaseFailed, reason, message
	return rep
}

// exitedBefore reports whether every container instance of the pod had
// exited by t.
func exitedBefore(status *kubecontainer.PodStatus, t time.Time) bool {
	for _, cs := range status.ContainerStatuses {
		if cs.State != kubecontainer.ContainerExited || !cs.FinishedAt.Before(t) {
			return false
		}
	}
	return true
}

// startTime is when the pod started on the node: its oldest sandbox's
// creation, else now (its first sync).
func startTime(status *kubecontainer.PodStatus) time.Time {
	if n := len(status.SandboxStatuses); n > 0 {
		if c := status.SandboxStatuses[n-1].GetCreatedAt(); c != 0 {
			return time.Unix(0, c)
		}
	}
	return time.Now()
}

// deletedWithoutRunning is the Terminated status of a pod deleted without
// having run here (its stored status says why: admission refused it), or
// nil when there is none to replace.
func (s *podSync) deletedWithoutRunning() *schemas.PodStatus {
	last := s.p.lastStatus
	if last == nil || last.Phase == schemas.PhaseTerminated {
		return nil
	}
	final := *last
	final.Phase = schemas.PhaseTerminated
	final.Revision, final.IntentSeq = s.want.Intent.Revision, s.want.IntentSeq
	final.ObservedAt = time.Now().UTC()
	return &final
}

// delete kills the pod with its grace period, removes what is left of it and
// reports it gone: Terminating while it runs, Terminated at the end.
func (s *podSync) delete(ctx context.Context) Report {
	mgr, pod, uid := s.w.mgr, s.want.Intent.Pod, s.want.UID
	s.w.cfg.Prober.StopLivenessAndStartup(uid)
	status, err := s.status(ctx)
	if err != nil {
		return Report{Actions: []schemas.ActionResult{}, Err: err}
	}
	if len(status.SandboxStatuses) == 0 && len(status.ContainerStatuses) == 0 {
		// Nothing of the pod on the node: nothing to kill. A pod admission
		// refused still shows its refusal, which is replaced as a deleted
		// pod's is; one whose deletion finished before has no worker state
		// left, so the status that deletion stored stays.
		return Report{Actions: []schemas.ActionResult{}, Status: s.deletedWithoutRunning(), gone: true}
	}
	terminating := s.terminating(status)
	s.w.putStatus(s.p, terminating)

	kill := mgr.KillPod
	if s.orphan {
		kill = mgr.KillOrphan
	}
	killed := s.killProbingReadiness(ctx, func() kubecontainer.PodSyncResult {
		return kill(ctx, pod, status, gracePeriodOverride(s.want.Intent))
	})
	rep := Report{Actions: killed.ActionResults(), Status: s.p.lastStatus}
	if err := killed.Error(); err != nil {
		rep.Err = err
		return rep
	}
	// What the kill left: the containers' exits, reported before the
	// containers are removed (the relist would not see them exited).
	if after, err := mgr.GetPodStatus(ctx, uid, pod.Name, pod.Namespace); err == nil {
		status = after
		for _, cs := range after.ContainerStatuses {
			if ev, ok := kubecontainer.ContainerDiedEvent(s.w.cfg.Node, after, cs); ok {
				s.w.emit.Emit(ctx, ev)
			}
		}
	}
	if err := s.w.gcPod(ctx, uid); err != nil {
		rep.Err = err
		return rep
	}
	s.w.cache.Store(uid, nil, time.Now())
	reason, message := "Deleted", "pod deleted by intent"
	if s.orphan {
		reason, message = schemas.ReasonOrphaned, "pod orphaned: the runtime ran it and no intent wants it"
	}
	s.w.emit.Emit(ctx, schemas.LifecycleEvent{
		ID:        podTerminatedID(uid, status),
		Type:      schemas.EventPodTerminated,
		UID:       uid,
		Namespace: pod.Namespace,
		Pod:       pod.Name,
		Reason:    reason,
		Message:   message,
		Time:      time.Now().UTC(),
	})

	// The last status shows how each container ended.
	final := s.decorate(mgr.ToAPIStatus(pod, status))
	final.Phase, final.Sandbox = schemas.PhaseTerminated, nil
	showExits(final.InitContainers, status)
	showExits(final.Containers, status)
	rep.Status, rep.gone = final, true
	return rep
}

// terminating is the pod's status while its delete runs.
func (s *podSync) terminating(status *kubecontainer.PodStatus) *schemas.PodStatus {
	st := s.decorate(s.w.mgr.ToAPIStatus(s.want.Intent.Pod, status))
	st.Phase = schemas.PhaseTerminating
	return st
}

// killProbingReadiness runs kill while the pod's readiness is still probed,
// as kubelet's: each change of it rewrites the Terminating status (from the
// relist's cache, which sees the containers stop), so a container that stops
// answering turns unready before the pod is gone. Then readiness is probed no
// more.
func (s *podSync) killProbingReadiness(ctx context.Context, kill func() kubecontainer.PodSyncResult) kubecontainer.PodSyncResult {
	defer s.w.cfg.Prober.RemovePod(s.want.UID)
	done := make(chan kubecontainer.PodSyncResult, 1)
	go func() { done <- kill() }()
	for {
		select {
		case res := <-done:
			return res
		case <-s.p.readinessChanged:
			if status, err := s.status(ctx); err == nil {
				s.w.putStatus(s.p, s.terminating(status))
			}
		}
	}
}

// gracePeriodOverride is the delete's gracePeriodSeconds, else its pod's
// terminationGracePeriodSeconds; nil lets KillPod take the running pod's
// (recorded on each container), else 30 s.
func gracePeriodOverride(in *schemas.PodIntent) *int64 {
	if g := in.GracePeriodSeconds; g != nil && *g >= 0 {
		return g
	}
	if in.Pod != nil {
		if g := in.Pod.Spec.TerminationGracePeriodSeconds; g != nil && *g >= 0 {
			return g
		}
	}
	return nil
}

// status reads the pod's status at least as new as the intent.
func (s *podSync) status(ctx context.Context) (*kubecontainer.PodStatus, error) {
	st, err := s.w.cache.Status(ctx, s.want.UID, s.want.ReceivedAt)
	if err != nil {
		return nil, err
	}
	if st == nil {
		pod := s.want.Intent.Pod
		st = &kubecontainer.PodStatus{UID: s.want.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	return st, nil
}

func (s *podSync) decorate(st *schemas.PodStatus) *schemas.PodStatus {
	st.Node = s.w.cfg.Node
	st.Revision = s.want.Intent.Revision
	st.IntentSeq = s.want.IntentSeq
	if c := s.p.resizePending; c != nil && s.want.Intent.Op == schemas.OpApply {
		st.Conditions = append(st.Conditions, *c)
	}
	return st
}

// showExits shows each container of a terminated pod as it ended (kubelet's
// view of a running pod would show a container waiting to restart).
func showExits(containers []schemas.ContainerStatus, status *kubecontainer.PodStatus) {
	for i := range containers {
		cs := status.FindContainerStatusByName(containers[i].Name)
		if cs == nil || cs.State != kubecontainer.ContainerExited {
			continue
		}
		c := &containers[i]
		c.ContainerID, c.State, c.ExitCode = cs.ID, schemas.ContainerExited, cs.ExitCode
		c.Reason, c.Message, c.Ready = kubecontainer.DiedReason(cs), cs.Message, false
		c.StartedAt, c.FinishedAt = rfc3339(cs.StartedAt), rfc3339(cs.FinishedAt)
	}
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// podTerminatedID names the termination after the pod's newest sandbox, the
// runtime object the deletion ended; a pod with no sandbox left is named by
// its uid.
func podTerminatedID(uid string, status *kubecontainer.PodStatus) string {
	if len(status.SandboxStatuses) > 0 {
		return kubecontainer.EventID(status.SandboxStatuses[0].Id, schemas.EventPodTerminated)
	}
	return kubecontainer.EventID(uid, schemas.EventPodTerminated)
}

// isBackOff reports whether err is a start waiting out its back-off: the
// sync changed nothing and the back-off runs out on its own.
func isBackOff(err error) bool {
	return errors.Is(err, kubecontainer.ErrCrashLoopBackOff) || errors.Is(err, kubecontainer.ErrImagePullBackOff)
}

// onlyBackOff reports whether every error of a sync is a back-off.
func onlyBackOff(err error) bool {
	var errs kubecontainer.SyncErrors
	if !errors.As(err, &errs) {
		return false
	}
	for _, e := range errs {
		if !isBackOff(e) {
			return false
		}
	}
	return true
}

// changedRuntime reports whether any action may have changed the runtime
// (anything but waiting out a back-off).
func changedRuntime(res kubecontainer.PodSyncResult) bool {
	for _, a := range res.Actions {
		if !isBackOff(a.Err) {
			return true
		}
	}
	return false
}

func isTerminal(p schemas.PodPhase) bool {
	return p == schemas.PhaseSucceeded || p == schemas.PhaseFailed
}

func sandboxReady(st *kubecontainer.PodStatus) bool {
	return len(st.SandboxStatuses) > 0 && st.SandboxStatuses[0].State == runtimeapi.PodSandboxState_SANDBOX_READY
}

// keepTransitionTimes gives each condition of st whose status is the same in
// prev the lastTransitionTime it had in prev.
func keepTransitionTimes(prev, st *schemas.PodStatus) {
	if prev == nil {
		return
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		for _, old := range prev.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
	}
}

// statusChange is how a pod's new status differs from its last.
type statusChange int

const (
	statusSame       statusChange = iota // only in when it was observed
	statusIntentOnly                     // also in its revision and intent seq
	statusVisible                        // in what readers act on
)

func compareStatus(last, st *schemas.PodStatus) statusChange {
	if last == nil {
		return statusVisible
	}
	x, y := *last, *st
	x.ObservedAt, y.ObservedAt = time.Time{}, time.Time{}
	if reflect.DeepEqual(x, y) {
		return statusSame
	}
	x.Revision, x.IntentSeq = y.Revision, y.IntentSeq
	if reflect.DeepEqual(x, y) {
		return statusIntentOnly
	}
	return statusVisible
}
