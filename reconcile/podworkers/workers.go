// Package podworkers is the kubelet half of jetlet's pod workers: it owns
// each pod's desired state and drives the pod to it through reconcile, on
// the intents the consumer hands it (Sync) and on its own (the relist saw
// the pod change, a back-off ran out, a failed sync is retried, the periodic
// resync). It stores each pod's status when it changes, kills the pods no
// intent wants, and collects what dead pods and containers leave behind.
//
// The consumer calls it one way: Start once with the desired state it
// recovered from the stream, then Sync once per applied intent. Nothing here
// calls the consumer back.
//
// Per pod, every sync (intent-driven or background) holds the pod's sync
// lock, so that syncs of one pod never overlap, as kubelet's pod workers
// guarantee; different pods sync in parallel.
package podworkers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetlet/jetlet/internal/periodic"
	"github.com/jetlet/jetlet/reconcile/admission"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/pleg"
	"github.com/jetlet/jetlet/reconcile/prober"
	"github.com/jetlet/jetlet/schemas"
)

// Desired is the state a pod is driven to: the last intent applied for it.
type Desired struct {
	UID string
	// Intent is an apply or a delete; a delete's pod may have only its metadata.
	Intent     *schemas.PodIntent
	IntentSeq  uint64
	ReceivedAt time.Time
}

// Report is what one sync did and found.
type Report struct {
	Actions []schemas.ActionResult
	// Err is set when the sync failed (an action, or reading the pod's
	// status): the pod is synced again with back-off.
	Err    error
	Status *schemas.PodStatus
	// Refused is admission's verdict on a new pod it did not let start.
	Refused *admission.Verdict
	// gone: a delete has finished and nothing of the pod is left on the
	// node; the pod's worker state is dropped.
	gone bool
}

// StatusSink stores pod statuses (jetlet_status); it must not block for long.
type StatusSink interface {
	PutStatus(st *schemas.PodStatus)
	// RefreshStatus stores a status that differs from the pod's last only in
	// its revision and intent seq, possibly later and coalesced with the
	// next.
	RefreshStatus(st *schemas.PodStatus)
}

// StatusReader is a StatusSink that reads back the statuses it stored of
// the pods uids, by uid (status.StatusWriter). Start takes them for the
// pods' last statuses,
// so that a restarted jetlet keeps the lastTransitionTime of every condition
// that did not change, as kubelet reads pod statuses back from the API
// server, and stores no status it already holds.
type StatusReader interface {
	Stored(ctx context.Context, uids []string) (map[string]*schemas.PodStatus, error)
}

// PodSyncer is what the pod workers need of reconcile.Kuberuntime, after
// kubelet's podSyncer: list the runtime's pods and read one's status, sync a
// pod to its spec, kill it (deleted, orphaned, past its deadline), collect
// the garbage, and say the pod's status in the contract's terms.
type PodSyncer interface {
	pleg.PodLister
	SyncPod(ctx context.Context, pod *corev1.Pod, status *kubecontainer.PodStatus) kubecontainer.PodSyncResult
	KillPod(ctx context.Context, pod *corev1.Pod, status *kubecontainer.PodStatus, gracePeriodOverride *int64) kubecontainer.PodSyncResult
	KillOrphan(ctx context.Context, pod *corev1.Pod, status *kubecontainer.PodStatus, gracePeriodOverride *int64) kubecontainer.PodSyncResult
	KillPastDeadline(ctx context.Context, pod *corev1.Pod, status *kubecontainer.PodStatus) kubecontainer.PodSyncResult
	KillEvicted(ctx context.Context, pod *corev1.Pod, status *kubecontainer.PodStatus, reason, message string, grace int64) kubecontainer.PodSyncResult
	GarbageCollect(ctx context.Context, pods kubecontainer.PodStateProvider) error
	GarbageCollectPod(ctx context.Context, uid string, pods kubecontainer.PodStateProvider) error
	ToAPIStatus(pod *corev1.Pod, status *kubecontainer.PodStatus) *schemas.PodStatus
	// PlanPod says what SyncPod would do now, acting on nothing.
	PlanPod(pod *corev1.Pod, status *kubecontainer.PodStatus, previous *corev1.Pod) schemas.PodPlan
}

// PodProber is what the pod workers need of the prober (*prober.Prober): they
// tell it what runs after every sync, and it tells them which pods need a
// sync (a liveness or startup failure) or only a new status (readiness or
// startup changed).
type PodProber interface {
	UpdatePod(pod *corev1.Pod, status *kubecontainer.PodStatus)
	StopLivenessAndStartup(uid string)
	RemovePod(uid string)
	Changed() <-chan struct{}
	TakeChanged() map[string]prober.Change
}

// AllocationCheckpoint keeps what the node allocated each pod across
// restarts of jetlet (kubelet's allocation checkpoint;
// reconcile.Kuberuntime keeps it in the pod's data dir): a restarted jetlet
// syncs a running pod with the resources the node took and decides again a
// resize it had not taken, instead of taking the pod's newest intent for
// its allocation.
type AllocationCheckpoint interface {
	StoreAllocation(pod *corev1.Pod) error
	// LoadAllocation is the containers' resources by name, and the pod's
	// under kubecontainer.AllocationPodLevel; nil when none are recorded.
	LoadAllocation(uid string) (map[string]corev1.ResourceRequirements, error)
}

// noCheckpoint keeps allocations in memory only.
type noCheckpoint struct{}

func (noCheckpoint) StoreAllocation(*corev1.Pod) error { return nil }
func (noCheckpoint) LoadAllocation(string) (map[string]corev1.ResourceRequirements, error) {
	return nil, nil
}

// noProber probes nothing.
type noProber struct{}

func (noProber) UpdatePod(*corev1.Pod, *kubecontainer.PodStatus) {}
func (noProber) StopLivenessAndStartup(string)                   {}
func (noProber) RemovePod(string)                                {}
func (noProber) Changed() <-chan struct{}                        { return nil }
func (noProber) TakeChanged() map[string]prober.Change           { return nil }

// Config configures Workers.
type Config struct {
	Node string
	// DeclaredFeatures are the node's declared features, which Plan checks
	// what a pod needs against (nodestatus.MissingFeatures).
	DeclaredFeatures []string
	// Workers bounds the background syncs run at once (default 16).
	Workers int
	// ResyncPeriod is how often every pod is synced again even when nothing
	// changed (default 1m, plus up to 10% jitter).
	ResyncPeriod time.Duration
	// GCPeriod is how often dead containers and gone pods are collected, as
	// kubelet's container GC period (default 1m).
	GCPeriod time.Duration
	// Prober runs the pods' probes; default none.
	Prober PodProber
	// Admission is the node as admission sees it now (admit.go); nil admits
	// every pod. It is called with the workers' lock held and must not call
	// them back.
	Admission func() admission.Node
	// Allocations keeps the pods' allocations across restarts; default
	// none (memory only).
	Allocations AllocationCheckpoint
	Logger      zerolog.Logger
	Registerer  prometheus.Registerer
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("invalid pod workers config")

func (c *Config) setDefaults() {
	if c.Workers == 0 {
		c.Workers = 16
	}
	if c.ResyncPeriod == 0 {
		c.ResyncPeriod = time.Minute
	}
	if c.GCPeriod == 0 {
		c.GCPeriod = time.Minute
	}
	if c.Prober == nil {
		c.Prober = noProber{}
	}
	if c.Allocations == nil {
		c.Allocations = noCheckpoint{}
	}
}

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	switch {
	case !schemas.ValidNodeName(c.Node):
		return fmt.Errorf("%w: node %q is not a DNS-1123 label", ErrInvalidConfig, c.Node)
	case c.Workers < 1:
		return fmt.Errorf("%w: workers %d < 1", ErrInvalidConfig, c.Workers)
	case c.ResyncPeriod < time.Second:
		return fmt.Errorf("%w: resync period %s < 1s", ErrInvalidConfig, c.ResyncPeriod)
	case c.GCPeriod <= 0:
		return fmt.Errorf("%w: gc period %s", ErrInvalidConfig, c.GCPeriod)
	}
	return nil
}

// Workers drives every pod of the node to its desired state.
type Workers struct {
	mgr    PodSyncer
	cache  *pleg.Relister
	emit   kubecontainer.Emitter
	status StatusSink
	cfg    Config
	log    zerolog.Logger
	m      *metrics

	started chan struct{} // closed by Start: the desired state is complete
	// allocated says (without blocking, coalesced) that what the admitted
	// pods hold has changed: one was admitted, finished or left.
	allocated chan struct{}
	sem       chan struct{} // one token per background sync running
	gcMu      sync.RWMutex  // held to collect the node's garbage; read-held to collect one pod's
	bg        sync.WaitGroup

	mu   sync.Mutex
	pods map[string]*pod // guarded by mu
	// held is what the active pods hold, for admission (holdLocked keeps
	// it); guarded by mu.
	held *admission.Held
	// unclaimed are the pods the runtime ran at StartOffline that the
	// checkpoint did not name: neither synced nor collected until Resume;
	// mu.
	unclaimed map[string]*kubecontainer.RuntimePod
	// running: background syncs may start (Run saw Start and is not
	// stopping); bgCtx is theirs. Both guarded by mu.
	running bool
	bgCtx   context.Context
}

// pod is one pod's worker state.
type pod struct {
	uid string
	// sync serialises the pod's syncs; its holder owns the fields marked
	// "sync holder".
	sync sync.Mutex

	// Written with both sync and Workers.mu held (by Start with mu alone,
	// before any sync can run); read with either.
	desired    *Desired
	orphan     bool               // desired is a delete of a pod no intent wants
	lastStatus *schemas.PodStatus // the last status stored, to skip storing it unchanged
	admitted   bool               // admission let it start, or it ran when jetlet started
	// allocated is the desired pod with the resources the node took
	// (resize.go); nil until a sync decided them: the desired pod's.
	allocated *corev1.Pod
	// checkpointed is the allocation Config.Allocations holds (sync
	// holder, or Start before any sync).
	checkpointed *corev1.Pod
	// resizePending is the PodResizePending condition of a resize the
	// node has not taken; nil when there is none.
	resizePending *schemas.PodCondition
	// resizeYielded: the node could take the resize, but gave the room to
	// a deferred one that goes first (resizeBefore); decided again once
	// that one is taken.
	resizeYielded bool

	// Guarded by Workers.mu.
	waking bool // a background sync is on its way

	// readinessChanged (capacity 1) tells a running delete, which holds the
	// sync lock while it kills, that the pod's readiness changed.
	readinessChanged chan struct{}

	// Sync holder.
	failures int               // consecutive failed syncs, for the retry delay
	retry    *time.Timer       // the next background sync a failure or back-off asked for
	span     trace.SpanContext // the applied intent's, for the background syncs after it
	// startTime is when the pod started on the node, for its
	// activeDeadlineSeconds: its oldest sandbox's creation (so it survives a
	// restart of jetlet), else the first sync; deadline wakes the pod then.
	startTime time.Time
	deadline  *time.Timer
	// evicted: the eviction manager or the node's shutdown ended the pod
	// (evict.go); cleared by the next intent for it, but for a shutdown's.
	evicted *eviction
	// resizing: a resize was taken and its ResizeCompleted is not said yet.
	resizing bool
	// The last failure logged and when, to log a failing pod's error once
	// a minute rather than at every retry.
	lastWarn   string
	lastWarnAt time.Time
}

// New returns Workers; it does no I/O before Start and Run. It refuses a nil
// dependency and a config that cannot work (ErrInvalidConfig).
func New(mgr PodSyncer, cache *pleg.Relister, emit kubecontainer.Emitter, status StatusSink, cfg Config) (*Workers, error) {
	switch {
	case mgr == nil:
		return nil, fmt.Errorf("%w: nil PodSyncer", ErrInvalidConfig)
	case cache == nil:
		return nil, fmt.Errorf("%w: nil relister (the pod cache)", ErrInvalidConfig)
	case emit == nil:
		return nil, fmt.Errorf("%w: nil Emitter", ErrInvalidConfig)
	case status == nil:
		return nil, fmt.Errorf("%w: nil StatusSink", ErrInvalidConfig)
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Workers{
		mgr: mgr, cache: cache, emit: emit, status: status, cfg: cfg,
		log:       cfg.Logger.With().Str("component", "podworkers").Logger(),
		m:         newMetrics(cfg.Registerer),
		started:   make(chan struct{}),
		allocated: make(chan struct{}, 1),
		sem:       make(chan struct{}, cfg.Workers),
		pods:      map[string]*pod{},
		held:      admission.NewHeld(),
		unclaimed: map[string]*kubecontainer.RuntimePod{},
	}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(podsCollector{w.PodCounts})
	}
	return w, nil
}

// Start takes the complete desired state recovered from the intents stream,
// lists the runtime's pods and makes every pod that no desired state names
// an orphan to delete (reason Orphaned). Background syncs (of every pod
// first, then on relist changes, retries, resyncs) and garbage collection
// begin only now, so that no pod is synced to a half-recovered state and
// nothing is collected that an intent still wants. Call it once, before any
// Sync; on error nothing has changed and it may be called again.
func (w *Workers) Start(ctx context.Context, desired []Desired) error {
	return w.start(ctx, desired, false)
}

// start is Start, or StartOffline when offline: then the stored statuses
// are not read (the bus is away) and the runtime's pods that no desired
// state names are left unclaimed, not deleted, until Resume.
func (w *Workers) start(ctx context.Context, desired []Desired, offline bool) error {
	running, err := w.mgr.GetPods(ctx, true)
	if err != nil {
		return fmt.Errorf("list the runtime's pods: %w", err)
	}
	var stored map[string]*schemas.PodStatus
	if r, ok := w.status.(StatusReader); ok && !offline {
		var uids []string
		for _, d := range desired {
			uids = append(uids, d.UID)
		}
		for _, rp := range running {
			uids = append(uids, rp.UID)
		}
		slices.Sort(uids)
		if stored, err = r.Stored(ctx, slices.Compact(uids)); err != nil {
			return fmt.Errorf("read the stored pod statuses: %w", err)
		}
	}
	allocations := w.loadAllocations(running)
	w.mu.Lock()
	for _, d := range desired {
		w.podLocked(d.UID).desired = &d
	}
	runs := map[string]bool{}
	for _, rp := range running {
		runs[rp.UID] = true
	}
	refused := w.admitRecoveredLocked(runs)
	for uid, alloc := range allocations {
		if p, ok := w.pods[uid]; ok && p.desired != nil && p.desired.Intent.Op == schemas.OpApply {
			p.allocated = withResources(p.desired.Intent.Pod, alloc)
			p.checkpointed = p.allocated
		}
	}
	for _, rp := range running {
		if _, known := w.pods[rp.UID]; known {
			continue
		}
		if offline {
			w.log.Warn().Str("uid", rp.UID).Str("pod", rp.Namespace+"/"+rp.Name).
				Msg("the runtime runs a pod the checkpoint does not name; left as it is until the intents stream says")
			w.unclaimed[rp.UID] = rp
			continue
		}
		w.orphanLocked(rp)
	}
	for uid, p := range w.pods {
		p.lastStatus = stored[uid]
		w.holdLocked(p)
	}
	w.mu.Unlock()
	// No sync of these pods runs before started is closed (and none after:
	// they have no desired state), so their statuses are stored without
	// their sync locks.
	for _, r := range refused {
		w.putStatus(r.p, r.status)
	}
	close(w.started)
	return nil
}

// orphanLocked makes rp, which the runtime runs and no intent wants, a pod
// to delete (reason Orphaned). The caller holds w.mu, and rp's sync lock
// when a sync of it may run.
func (w *Workers) orphanLocked(rp *kubecontainer.RuntimePod) {
	w.log.Warn().Str("uid", rp.UID).Str("pod", rp.Namespace+"/"+rp.Name).
		Msg("deleting an orphaned pod: the runtime runs it and no intent wants it")
	p := w.podLocked(rp.UID)
	p.orphan, p.admitted = true, true
	p.desired = &Desired{UID: rp.UID, ReceivedAt: time.Now(), Intent: &schemas.PodIntent{
		APIVersion: schemas.APIVersion, Kind: schemas.KindPodIntent, Op: schemas.OpDelete,
		Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(rp.UID), Name: rp.Name, Namespace: rp.Namespace}},
	}}
}

func (w *Workers) podLocked(uid string) *pod {
	p, ok := w.pods[uid]
	if !ok {
		p = &pod{uid: uid, readinessChanged: make(chan struct{}, 1)}
		w.pods[uid] = p
	}
	return p
}

// Run runs the background syncs and garbage collection from Start until ctx
// is done. Then it starts no more, gives the ones running drain to finish,
// cancels what is left and returns once they have.
func (w *Workers) Run(ctx context.Context, drain time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-w.started:
	}
	bgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	w.cache.TakeChanged() // every pod is synced now anyway
	w.mu.Lock()
	w.running, w.bgCtx = true, bgCtx
	w.mu.Unlock()
	w.wakeAll()

	var gc sync.WaitGroup
	gc.Go(func() { w.collectGarbage(ctx) })
	resync := time.NewTimer(jitter(w.cfg.ResyncPeriod))
	defer resync.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-w.cache.Changed():
			for _, uid := range w.cache.TakeChanged() {
				w.wake(uid)
			}
		case <-w.cfg.Prober.Changed():
			for uid, c := range w.cfg.Prober.TakeChanged() {
				switch {
				case c.Sync:
					w.wake(uid) // the sync kills the container; its status follows
				case c.Status:
					w.rewriteStatus(uid)
				}
			}
		case <-resync.C:
			w.wakeAll()
			resync.Reset(jitter(w.cfg.ResyncPeriod))
		}
	}
	gc.Wait()

	w.mu.Lock()
	w.running = false // no background sync starts from now on
	w.mu.Unlock()
	finished := make(chan struct{})
	go func() { w.bg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(drain):
		w.log.Warn().Dur("drain_ms", drain).Msg("background syncs did not finish in time; cancelling them")
		cancel()
		<-finished
	}
}

// jitter spreads a period over [p, 1.1p).
func jitter(p time.Duration) time.Duration { return p + rand.N(p/10+1) }

// wake asks for a background sync of the pod, unless one is on its way.
func (w *Workers) wake(uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.pods[uid]; ok {
		w.wakeLocked(p)
	}
}

// WakeWhere asks for a background sync of every applied pod whose spec
// matches: the pods that refer to a ConfigMap or Secret that changed, so
// their mounted files follow it and a container waiting for it starts. match
// is called with the workers' lock held and must not call them back.
func (w *Workers) WakeWhere(match func(*corev1.Pod) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.pods {
		if p.desired != nil && p.desired.Intent.Op == schemas.OpApply && p.desired.Intent.Pod != nil && match(p.desired.Intent.Pod) {
			w.wakeLocked(p)
		}
	}
}

func (w *Workers) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.pods {
		w.wakeLocked(p)
	}
}

func (w *Workers) wakeLocked(p *pod) {
	if p.waking || !w.running || p.desired == nil {
		return
	}
	p.waking = true
	w.bg.Add(1) // never while Run waits: running is false by then
	go w.background(w.bgCtx, p)
}

// background syncs the pod to its desired state; no result is due. A wake
// that comes while it runs asks for another sync after it.
func (w *Workers) background(ctx context.Context, p *pod) {
	defer w.bg.Done()
	p.sync.Lock()
	defer p.sync.Unlock()
	w.mu.Lock()
	p.waking = false
	current := w.running && w.pods[p.uid] == p
	w.mu.Unlock()
	if !current {
		return
	}
	select {
	case w.sem <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-w.sem }()
	w.syncLocked(trace.ContextWithSpanContext(ctx, p.span), p)
}

// rewriteStatus stores the pod's status again from the cache and the probe
// results, without a sync: a readiness or startup result changed.
func (w *Workers) rewriteStatus(uid string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pods[uid]
	if !ok || !w.running || p.desired == nil {
		return
	}
	if p.desired.Intent.Op == schemas.OpDelete {
		// Only readiness is probed while a delete runs; the delete rewrites
		// its Terminating status.
		select {
		case p.readinessChanged <- struct{}{}:
		default:
		}
		return
	}
	ctx := w.bgCtx
	w.bg.Go(func() {
		p.sync.Lock()
		defer p.sync.Unlock()
		s := &podSync{w: w, p: p, want: p.syncedDesired(), orphan: p.orphan}
		if st := s.statusOnly(ctx); st != nil {
			w.putStatus(p, st)
		}
	})
}

// Sync drives the pod to want now, after any sync of the pod already
// running, and reports what it did. Intents of one pod must come in the
// order they were applied. A delete kills with the applied pod's spec
// (its containers, their grace) unless the delete says otherwise.
func (w *Workers) Sync(ctx context.Context, want Desired) Report {
	w.mu.Lock()
	p := w.podLocked(want.UID)
	w.mu.Unlock()
	p.sync.Lock()
	defer p.sync.Unlock()
	w.mu.Lock()
	if want.Intent.Op == schemas.OpDelete && p.desired != nil && p.desired.Intent.Op == schemas.OpApply {
		want.Intent = deleteOf(want.Intent, p.desired.Intent)
	}
	w.pods[want.UID] = p // again, if a background delete finished meanwhile
	if want.Intent.Op == schemas.OpApply && !p.admitted {
		if v := w.admitLocked(want.Intent.Pod); !v.Admit {
			p.desired, p.orphan = nil, false
			w.mu.Unlock()
			return w.refuse(p, want, v)
		}
		p.admitted, p.allocated = true, want.Intent.Pod
		w.allocationChanged()
	}
	p.desired, p.orphan = &want, false
	w.holdLocked(p)
	w.mu.Unlock()
	if p.evicted == nil || !p.evicted.shutdown {
		// A new intent is a new start, as a new pod replacing an evicted
		// one; but not while the node goes down.
		p.evicted = nil
	}
	p.span = trace.SpanContextFromContext(ctx)
	return w.syncLocked(ctx, p)
}

// refuse answers for a pod admission refused (whose sync lock the caller
// holds): its status says Failed with kubelet's reason; nothing starts.
func (w *Workers) refuse(p *pod, want Desired, v admission.Verdict) Report {
	w.log.Info().Str("uid", want.UID).Str("pod", want.Intent.Pod.Namespace+"/"+want.Intent.Pod.Name).
		Str("reason", v.Reason).Str("message", v.Message).Msg("pod refused at admission")
	st := refusedStatus(w.cfg.Node, want, v)
	w.putStatus(p, st)
	return Report{Actions: []schemas.ActionResult{}, Status: st, Refused: &v}
}

// deleteOf is a delete intent to apply to a pod the node runs from applied:
// it kills with applied's spec (its containers, their grace) unless the
// delete says otherwise.
func deleteOf(del, applied *schemas.PodIntent) *schemas.PodIntent {
	merged := *del
	if merged.GracePeriodSeconds == nil && del.Pod != nil {
		merged.GracePeriodSeconds = del.Pod.Spec.TerminationGracePeriodSeconds
	}
	merged.Pod = applied.Pod
	return &merged
}

// syncLocked runs one sync of p (whose sync lock the caller holds) and
// arranges what comes after it: the status stored, a retry, forgetting a
// pod that is gone.
func (w *Workers) syncLocked(ctx context.Context, p *pod) Report {
	start := time.Now()
	w.mu.Lock()
	decided := w.allocateLocked(p)
	w.holdLocked(p)
	w.mu.Unlock()
	w.checkpointAllocation(p)
	w.emitAll(ctx, p, decided)
	s := &podSync{w: w, p: p, want: p.syncedDesired(), orphan: p.orphan}
	rep := s.run(withIntent(ctx, s.want))
	w.emitAll(ctx, p, w.resizeCompleted(p, rep.Status))
	outcome := syncOutcome(rep)
	w.m.syncDuration.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
	if outcome == syncFailed {
		w.warnFailed(p, rep.Err)
	}
	if rep.Status != nil {
		w.putStatus(p, rep.Status)
	}
	if p.retry != nil {
		p.retry.Stop()
		p.retry = nil
	}
	if after := p.retryAfter(rep); after > 0 {
		uid := p.uid
		p.retry = time.AfterFunc(after, func() { w.wake(uid) })
	}
	if p.deadline != nil {
		p.deadline.Stop()
		p.deadline = nil
	}
	if at, ok := p.activeDeadline(); ok && !rep.gone {
		if until := time.Until(at); until > 0 {
			uid := p.uid
			p.deadline = time.AfterFunc(until, func() { w.wake(uid) })
		}
	}
	if rep.gone {
		w.mu.Lock()
		if w.pods[p.uid] == p {
			delete(w.pods, p.uid)
			w.held.Unset(types.UID(p.uid))
		}
		w.wakeDeferredLocked()
		w.mu.Unlock()
		w.allocationChanged()
	}
	return rep
}

// activeDeadline is when an applied pod's activeDeadlineSeconds runs out,
// counted from its start on the node; the caller holds p.sync.
func (p *pod) activeDeadline() (time.Time, bool) {
	in := p.desired.Intent
	if in.Op == schemas.OpDelete || in.Pod == nil || in.Pod.Spec.ActiveDeadlineSeconds == nil || p.startTime.IsZero() {
		return time.Time{}, false
	}
	return p.startTime.Add(time.Duration(*in.Pod.Spec.ActiveDeadlineSeconds) * time.Second), true
}

func syncOutcome(rep Report) string {
	switch {
	case rep.Err == nil:
		return syncSucceeded
	case onlyBackOff(rep.Err):
		return syncBackOff
	}
	return syncFailed
}

// failedSyncWarnEvery bounds how often one pod's failing syncs are logged
// with the same error: a failing pod is retried every few seconds.
const failedSyncWarnEvery = time.Minute

// warnFailed logs a failed sync of p (whose sync lock the caller holds) at
// warn: a new error at once, the same one again at most once a minute.
func (w *Workers) warnFailed(p *pod, err error) {
	msg := err.Error()
	if msg == p.lastWarn && time.Since(p.lastWarnAt) < failedSyncWarnEvery {
		return
	}
	p.lastWarn, p.lastWarnAt = msg, time.Now()
	ev := w.log.Warn().Err(err).Str("uid", p.uid).Int("failures", p.failures+1)
	if d := p.desired; d != nil && d.Intent.Pod != nil {
		ev = ev.Str("pod", d.Intent.Pod.Namespace+"/"+d.Intent.Pod.Name)
	}
	ev.Msg("pod sync failed; retrying with back-off")
}

// putStatus stores the pod's status unless it is the one stored last; one
// that differs from it only in its revision and intent seq (a no-op intent's)
// is a refresh, which the sink may coalesce. A condition whose status is the
// last one's keeps its lastTransitionTime, as kubelet's status manager keeps
// it.
func (w *Workers) putStatus(p *pod, st *schemas.PodStatus) {
	keepTransitionTimes(p.lastStatus, st)
	switch compareStatus(p.lastStatus, st) {
	case statusSame:
		return
	case statusIntentOnly:
		w.status.RefreshStatus(st)
	default:
		w.status.PutStatus(st)
	}
	finished := isTerminal(st.Phase) && (p.lastStatus == nil || !isTerminal(p.lastStatus.Phase))
	w.mu.Lock()
	p.lastStatus = st
	w.holdLocked(p)
	w.mu.Unlock()
	if finished && p.admitted {
		w.allocationChanged()
		w.wakeDeferred()
	}
}

// AllocationChanged signals (coalesced) that what the admitted pods hold has
// changed, for the node record.
func (w *Workers) AllocationChanged() <-chan struct{} { return w.allocated }

func (w *Workers) allocationChanged() {
	select {
	case w.allocated <- struct{}{}:
	default:
	}
}

// backOffPoll is how often a pod waiting out a back-off is looked at again;
// from the cache, that costs no runtime call.
const backOffPoll = time.Second

// retryAfter is when to sync the pod again after rep although nothing
// changes: soon for a back-off that runs out on its own, with a delay
// growing from 1 s to 1 min for a failure; never after a success.
func (p *pod) retryAfter(rep Report) time.Duration {
	switch {
	case rep.Err == nil:
		p.failures = 0
		return 0
	case onlyBackOff(rep.Err):
		return backOffPoll
	}
	p.failures++
	return min(time.Second<<min(p.failures-1, 6), time.Minute)
}

// wanted reports whether the pod is desired on the node: its desired state
// is an apply. Garbage collection removes the content of pods not wanted.
func (w *Workers) wanted(uid string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pods[uid]
	return ok && p.desired != nil && p.desired.Intent.Op != schemas.OpDelete || w.unclaimed[uid] != nil
}

// collectGarbage removes what pods no longer wanted left behind, and dead
// container instances beyond the policy, at once and then every period
// until ctx is done: at once for what went while jetlet was down (the pod
// cgroups of pods gone with a crash among it, as kubelet's first
// housekeeping removes them).
func (w *Workers) collectGarbage(ctx context.Context) {
	collect := func() {
		if err := w.DeleteAllUnusedContainers(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn().Err(err).Msg("garbage collection")
		}
	}
	collect()
	periodic.Every(ctx, w.cfg.GCPeriod, collect)
}

// gc runs one garbage collection of the node, while no other collection
// runs; gone says which pods' content may go.
func (w *Workers) gc(ctx context.Context, gone func(uid string) bool) error {
	w.gcMu.Lock()
	defer w.gcMu.Unlock()
	return w.mgr.GarbageCollect(ctx, kubecontainer.PodStateFunc(gone))
}

// gcPod collects the content of the pod uid, deleted. Collections of
// different pods (which touch different objects) run together; one of the
// node waits for them.
func (w *Workers) gcPod(ctx context.Context, uid string) error {
	w.gcMu.RLock()
	defer w.gcMu.RUnlock()
	return w.mgr.GarbageCollectPod(ctx, uid, kubecontainer.PodStateFunc(func(string) bool { return true }))
}

// PodCounts counts the pods with a desired state by the phase last stored.
func (w *Workers) PodCounts() schemas.PodCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	counts := schemas.PodCounts{ByPhase: map[schemas.PodPhase]int{}}
	for _, p := range w.pods {
		if p.desired == nil || p.lastStatus == nil {
			continue
		}
		counts.Total++
		counts.ByPhase[p.lastStatus.Phase]++
	}
	return counts
}

type intentKey struct{}

// withIntent marks ctx as a sync for want, so that the events it emits name
// the intent.
func withIntent(ctx context.Context, want Desired) context.Context {
	return context.WithValue(ctx, intentKey{}, want)
}

// IntentEmitter adds the intent being synced (its sequence and revision) to
// every event emitted from within a sync.
// It flushes through to emit when emit is a kubecontainer.Flusher.
func IntentEmitter(emit kubecontainer.Emitter) kubecontainer.Emitter { return intentEmitter{emit} }

type intentEmitter struct{ next kubecontainer.Emitter }

func (e intentEmitter) Emit(ctx context.Context, ev schemas.LifecycleEvent) {
	if d, ok := ctx.Value(intentKey{}).(Desired); ok && d.IntentSeq != 0 {
		ev.IntentSeq = d.IntentSeq
		ev.Revision = d.Intent.Revision
	}
	e.next.Emit(ctx, ev)
}

func (e intentEmitter) Flush(ctx context.Context) error {
	if f, ok := e.next.(kubecontainer.Flusher); ok {
		return f.Flush(ctx)
	}
	return nil
}

// WillRestart reports whether the pod uid's spec restarts its container
// name after an exit with exitCode, as kubelet decides it: by the
// container's restart rules, else its restart policy (a sidecar's is
// Always), else the pod's (Never: no; OnFailure: on a non-zero exit).
// false for a pod or container the node does not want. Such a container is waiting to restart: kubelet's
// previous instance of it is its newest (`logs --previous`).
func (w *Workers) WillRestart(uid, name string, exitCode int32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pods[uid]
	if p == nil || p.desired == nil || p.desired.Intent.Op != schemas.OpApply {
		return false
	}
	spec := &p.desired.Intent.Pod.Spec
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if list[i].Name != name {
				continue
			}
			return kubecontainer.ContainerShouldRestart(&list[i], spec, exitCode)
		}
	}
	return false
}
