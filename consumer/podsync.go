package consumer

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/schemas"
)

// reconciler is what the pod syncer needs of reconcile.Manager.
type reconciler interface {
	podLister
	SyncPod(ctx context.Context, pod *corev1.Pod, status *reconcile.PodStatus) reconcile.PodSyncResult
	KillPod(ctx context.Context, pod *corev1.Pod, status *reconcile.PodStatus, gracePeriodOverride *int64) reconcile.PodSyncResult
	GarbageCollect(ctx context.Context, pods reconcile.PodStateProvider) error
	ToAPIStatus(pod *corev1.Pod, status *reconcile.PodStatus) *schemas.PodStatus
}

// PodSyncer is the Syncer of a real node: kubelet's syncPod over
// reconcile.Manager, reading pod statuses from the Relister's cache so that a
// sync of a converged pod asks the runtime nothing.
type PodSyncer struct {
	mgr       reconciler
	cache     *Relister
	emit      func(ctx context.Context, ev schemas.LifecycleEvent)
	putStatus func(st *schemas.PodStatus)
	node      string
	wanted    func(uid string) bool

	gcMu     sync.Mutex // one garbage collection at a time
	mu       sync.Mutex
	failures map[string]int // consecutive failed syncs per pod, for the retry delay
}

// NewPodSyncer returns a PodSyncer. wanted says whether a pod is still
// desired on the node (the consumer's Wanted), for garbage collection.
func NewPodSyncer(mgr reconciler, cache *Relister, node string, emit func(context.Context, schemas.LifecycleEvent), putStatus func(*schemas.PodStatus), wanted func(uid string) bool) *PodSyncer {
	return &PodSyncer{
		mgr: mgr, cache: cache, node: node, emit: emit, putStatus: putStatus, wanted: wanted,
		failures: map[string]int{},
	}
}

type intentKey struct{}

// intentOf returns the desired state a sync runs for, so that the events it
// emits name the intent.
func intentOf(ctx context.Context) (Desired, bool) {
	d, ok := ctx.Value(intentKey{}).(Desired)
	return d, ok
}

// EventEmitter adds the intent being synced (its sequence and revision) to
// every event emitted from within a sync.
func EventEmitter(emit func(context.Context, schemas.LifecycleEvent)) func(context.Context, schemas.LifecycleEvent) {
	return func(ctx context.Context, ev schemas.LifecycleEvent) {
		if d, ok := intentOf(ctx); ok {
			ev.IntentSeq = d.IntentSeq
			ev.Revision = d.Intent.Revision
		}
		emit(ctx, ev)
	}
}

// Sync implements Syncer.
func (s *PodSyncer) Sync(ctx context.Context, want Desired) Report {
	ctx = context.WithValue(ctx, intentKey{}, want)
	if want.Intent.Op == schemas.OpDelete {
		return s.delete(ctx, want)
	}
	pod := want.Intent.Pod
	status, err := s.status(ctx, want)
	if err != nil {
		return s.failed(want, Report{Err: err})
	}
	api := s.mgr.ToAPIStatus(pod, status)
	if isTerminal(api.Phase) && !sandboxReady(status) {
		// Finished for good, as kubelet's terminated pods: nothing restarts.
		return s.succeeded(want, Report{Actions: []schemas.ActionResult{}, Status: s.decorate(api, want)})
	}
	res := s.mgr.SyncPod(ctx, pod, status)
	if changedRuntime(res.Actions) {
		// Read back what the sync did, so that the next sync needs no relist.
		at := time.Now()
		if fresh, err := s.mgr.GetPodStatus(ctx, want.UID, pod.Name, pod.Namespace); err == nil {
			s.cache.Store(want.UID, fresh, at)
			status = fresh
		}
	}
	if len(res.Actions) > 0 {
		// Only an action changes what the status says (the runtime, or a
		// container's waiting reason); a no-op sync reuses it.
		api = s.mgr.ToAPIStatus(pod, status)
	}
	rep := Report{
		Actions: nonNil(res.Actions),
		Err:     res.Error(),
		Status:  s.decorate(api, want),
	}
	if rep.Err != nil {
		return s.failed(want, rep)
	}
	return s.succeeded(want, rep)
}

// delete kills the pod with its grace period, removes what is left of it and
// reports it gone: Terminating while it runs, Terminated at the end.
func (s *PodSyncer) delete(ctx context.Context, want Desired) Report {
	pod := want.Intent.Pod
	status, err := s.status(ctx, want)
	if err != nil {
		return s.failed(want, Report{Err: err})
	}
	if len(status.SandboxStatuses) == 0 && len(status.ContainerStatuses) == 0 {
		// Nothing of the pod on the node: nothing to do, and no status to
		// replace the one its actual deletion left.
		return s.succeeded(want, Report{Actions: []schemas.ActionResult{}, Gone: true})
	}
	terminating := s.decorate(s.mgr.ToAPIStatus(pod, status), want)
	terminating.Phase = schemas.PhaseTerminating
	s.putStatus(terminating)

	grace := want.Intent.GracePeriod()
	killed := s.mgr.KillPod(ctx, pod, status, &grace)
	rep := Report{Actions: nonNil(killed.Actions), Status: terminating}
	if err := killed.Error(); err != nil {
		rep.Err = err
		return s.failed(want, rep)
	}
	// What the kill left: the containers' exits, reported before the
	// containers are removed (the relist would not see them exited).
	if after, err := s.mgr.GetPodStatus(ctx, want.UID, pod.Name, pod.Namespace); err == nil {
		status = after
		for _, cs := range after.ContainerStatuses {
			if ev, ok := reconcile.ContainerDiedEvent(s.node, after, cs); ok {
				s.emit(ctx, ev)
			}
		}
	}
	if err := s.collect(ctx, want.UID); err != nil {
		rep.Err = err
		return s.failed(want, rep)
	}
	s.cache.Store(want.UID, nil, time.Now())
	s.emit(ctx, schemas.LifecycleEvent{
		ID:        podTerminatedID(want.UID, status),
		Type:      schemas.EventPodTerminated,
		UID:       want.UID,
		Namespace: pod.Namespace,
		Pod:       pod.Name,
		Reason:    "Deleted",
		Message:   "pod deleted by intent",
		Time:      time.Now().UTC(),
	})

	// The last status shows how each container ended.
	final := s.decorate(s.mgr.ToAPIStatus(pod, status), want)
	final.Phase, final.Sandbox = schemas.PhaseTerminated, nil
	showExits(final.InitContainers, status)
	showExits(final.Containers, status)
	rep.Status, rep.Gone = final, true
	return s.succeeded(want, rep)
}

// showExits shows each container of a terminated pod as it ended (kubelet's
// view of a running pod would show a container waiting to restart).
func showExits(containers []schemas.ContainerStatus, status *reconcile.PodStatus) {
	for i := range containers {
		cs := status.FindContainerStatusByName(containers[i].Name)
		if cs == nil || cs.State != reconcile.ContainerExited {
			continue
		}
		c := &containers[i]
		c.ContainerID, c.State, c.ExitCode = cs.ID, schemas.ContainerExited, cs.ExitCode
		c.Reason, c.Message, c.Ready = reconcile.DiedReason(cs), cs.Message, false
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
func podTerminatedID(uid string, status *reconcile.PodStatus) string {
	if len(status.SandboxStatuses) > 0 {
		return reconcile.EventID(status.SandboxStatuses[0].Id, schemas.EventPodTerminated)
	}
	return reconcile.EventID(uid, schemas.EventPodTerminated)
}

// collect removes the dead containers, sandboxes, logs and volumes of the
// pod (and of any other pod no longer wanted).
func (s *PodSyncer) collect(ctx context.Context, uid string) error {
	return s.gc(ctx, func(u string) bool { return u == uid || !s.wanted(u) })
}

// GarbageCollect removes what pods no longer wanted left behind, and dead
// container instances beyond the policy, every period until ctx is done.
func (s *PodSyncer) GarbageCollect(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = s.gc(ctx, func(u string) bool { return !s.wanted(u) })
		}
	}
}

// gc runs one garbage collection, one at a time; gone says which pods'
// content may go.
func (s *PodSyncer) gc(ctx context.Context, gone func(uid string) bool) error {
	s.gcMu.Lock()
	defer s.gcMu.Unlock()
	return s.mgr.GarbageCollect(ctx, reconcile.PodStateFunc(gone))
}

// RunningPods implements Syncer.
func (s *PodSyncer) RunningPods(ctx context.Context) ([]PodRef, error) {
	pods, err := s.mgr.GetPods(ctx, true)
	if err != nil {
		return nil, err
	}
	refs := make([]PodRef, 0, len(pods))
	for _, p := range pods {
		refs = append(refs, PodRef{UID: p.UID, Namespace: p.Namespace, Name: p.Name})
	}
	return refs, nil
}

// status reads the pod's status at least as new as the intent.
func (s *PodSyncer) status(ctx context.Context, want Desired) (*reconcile.PodStatus, error) {
	st, err := s.cache.Status(ctx, want.UID, want.ReceivedAt)
	if err != nil {
		return nil, err
	}
	if st == nil {
		pod := want.Intent.Pod
		st = &reconcile.PodStatus{UID: want.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	return st, nil
}

func (s *PodSyncer) decorate(st *schemas.PodStatus, want Desired) *schemas.PodStatus {
	st.Node = s.node
	st.Revision = want.Intent.Revision
	st.IntentSeq = want.IntentSeq
	return st
}

// backOffErrors are the action errors of a pod waiting out a back-off: the
// sync changed nothing and is worth trying again soon.
var backOffErrors = map[string]bool{
	reconcile.ErrCrashLoopBackOff.Error(): true,
	reconcile.ErrImagePullBackOff.Error(): true,
}

// backOffPoll is how often a pod in back-off is looked at again; from the
// cache, that costs no runtime call.
const backOffPoll = time.Second

// failed sets when to try again: soon for a back-off that runs out on its
// own, with a growing delay (1 s doubling to 1 min) for a failure.
func (s *PodSyncer) failed(want Desired, rep Report) Report {
	onlyBackOff := len(rep.Actions) > 0
	for _, a := range rep.Actions {
		if a.Error != "" && !backOffErrors[a.Error] {
			onlyBackOff = false
		}
	}
	if onlyBackOff {
		rep.RetryAfter = backOffPoll
		return rep
	}
	s.mu.Lock()
	n := s.failures[want.UID]
	s.failures[want.UID] = n + 1
	s.mu.Unlock()
	rep.RetryAfter = min(time.Second<<min(n, 6), time.Minute)
	return rep
}

func (s *PodSyncer) succeeded(want Desired, rep Report) Report {
	s.mu.Lock()
	delete(s.failures, want.UID)
	s.mu.Unlock()
	return rep
}

// changedRuntime reports whether any action may have changed the runtime
// (anything but waiting out a back-off).
func changedRuntime(actions []schemas.ActionResult) bool {
	for _, a := range actions {
		if !backOffErrors[a.Error] {
			return true
		}
	}
	return false
}

func isTerminal(p schemas.PodPhase) bool {
	return p == schemas.PhaseSucceeded || p == schemas.PhaseFailed
}

func sandboxReady(st *reconcile.PodStatus) bool {
	return len(st.SandboxStatuses) > 0 && st.SandboxStatuses[0].State == runtimeapi.PodSandboxState_SANDBOX_READY
}

func nonNil(a []schemas.ActionResult) []schemas.ActionResult {
	if a == nil {
		return []schemas.ActionResult{}
	}
	return a
}

var _ Syncer = (*PodSyncer)(nil)
