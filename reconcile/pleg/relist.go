// Package pleg is jetlet's pod lifecycle event generator and pod cache
// (kubelet's PLEG and PodCache): it relists the runtime's pods, keeps their
// statuses, emits ContainerDied for containers that exited on their own and
// tells which pods changed.
package pleg

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/condwake"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// PodLister is what the relist needs of reconcile.Kuberuntime.
type PodLister interface {
	GetPods(ctx context.Context, all bool) ([]*kubecontainer.RuntimePod, error)
	GetPodStatus(ctx context.Context, uid, name, namespace string) (*kubecontainer.PodStatus, error)
}

// ContainerEventsFunc subscribes to the runtime's container events (CRI
// GetContainerEvents): it calls ready once the stream is established, then
// event for each event, until ctx ends or the stream breaks. It returns an
// error wrapping ErrEventsUnsupported when the runtime has no such stream.
type ContainerEventsFunc func(ctx context.Context, ready, event func()) error

// errRelistStopped answers the workers still waiting when the relist stops.
var errRelistStopped = errors.New("the relist loop has stopped")

// ErrEventsUnsupported says the runtime offers no container event stream.
var ErrEventsUnsupported = errors.New("container events not supported by the runtime")

// Config configures a Relister.
type Config struct {
	// Node names the node in the events the relist derives.
	Node string
	// Period between relists (default 1s), kubelet's PLEG relist period.
	Period time.Duration
	// EventedPeriod is the period between relists while the event stream
	// is connected (default Period): kubelet's evented PLEG relists every
	// 300s then, and every Period again as soon as the stream breaks.
	EventedPeriod time.Duration
	// ContainerEvents, when set, lets the runtime's event stream trigger a
	// relist at once and keep the cache current between relists.
	ContainerEvents ContainerEventsFunc
	Logger          zerolog.Logger
	Registerer      prometheus.Registerer
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("invalid relist config")

func (c *Config) setDefaults() {
	if c.Period == 0 {
		c.Period = time.Second
	}
	if c.EventedPeriod == 0 {
		c.EventedPeriod = c.Period
	}
}

// Validate reports the first setting of a defaulted config that cannot work.
func (c *Config) Validate() error {
	switch {
	case !schemas.ValidNodeName(c.Node):
		return fmt.Errorf("%w: node %q is not a DNS-1123 label", ErrInvalidConfig, c.Node)
	case c.Period < 0:
		return fmt.Errorf("%w: period %s is negative", ErrInvalidConfig, c.Period)
	case c.EventedPeriod < 0:
		return fmt.Errorf("%w: evented period %s is negative", ErrInvalidConfig, c.EventedPeriod)
	}
	return nil
}

// Relister is jetlet's PLEG and pod cache. Every period (and at once when the
// runtime reports a container event, or a pod worker needs a fresher view) it
// lists the runtime's sandboxes and containers, compares them with the last
// listing, reads the full status of the pods that changed into the cache,
// emits every fact their statuses imply (kubecontainer.PodFacts: sandboxes and
// containers created, started, died; the event ledger stores each fact once,
// so facts a killed jetlet never published are published now, and facts
// already stored cost a lookup), and signals Changed for the pod workers to
// take the pods that changed.
//
// The cache lets a pod worker sync without asking the runtime: a status is
// usable for an intent that arrived at t when it was read after t, when a
// relist started after t, or when the runtime's event stream is connected
// and every event received has been relisted.
type Relister struct {
	lister PodLister
	emit   kubecontainer.Emitter
	cfg    Config
	log    zerolog.Logger

	relistDuration prometheus.Histogram
	streamUp       prometheus.Gauge   // 1 while the event stream is connected
	eventsReceived prometheus.Counter // container events the stream delivered

	mu         sync.Mutex
	changed    *sync.Cond
	cache      map[string]cacheEntry
	validAsOf  time.Time                                          // every entry (and every absence) is true as of this
	asked      bool                                               // a relist was asked for before the next period
	live       bool                                               // the event stream is connected
	unseen     int                                                // events received and not yet covered by a relist
	seen       map[string]map[string]kubecontainer.ContainerState // uid → container id → state, last listing
	unread     map[string]podFailure                              // pods changed whose status could not be read
	stopped    bool                                               // Run has returned: no relist will come
	failure    error                                              // why the last relist failed, when it did
	failedAsOf time.Time                                          // when the failed relist started
	dirty      map[string]struct{}                                // pods changed and not yet taken
	kick       chan struct{}
	notify     chan struct{} // signalled when dirty gains a pod
}

type podFailure struct {
	err error
	at  time.Time // start of the relist that failed to read the pod
}

type cacheEntry struct {
	status *kubecontainer.PodStatus
	at     time.Time // read from the runtime at or after this
}

// New returns a Relister; it does nothing before Run. It refuses a nil
// lister or emitter and a config that cannot work (ErrInvalidConfig).
func New(lister PodLister, emit kubecontainer.Emitter, cfg Config) (*Relister, error) {
	if lister == nil {
		return nil, fmt.Errorf("%w: nil PodLister", ErrInvalidConfig)
	}
	if emit == nil {
		return nil, fmt.Errorf("%w: nil Emitter", ErrInvalidConfig)
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Relister{
		lister: lister,
		emit:   emit,
		cfg:    cfg,
		log:    cfg.Logger.With().Str("component", "relist").Logger(),
		relistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "jetlet_relist_duration_seconds",
			Help:    "Duration of one relist of the runtime's pods.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17), // 0.1 ms to 6.6 s, each bound twice the last
		}),
		streamUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "jetlet_container_event_stream_up",
			Help: "1 while the runtime's container event stream (CRI GetContainerEvents) is connected: the evented PLEG.",
		}),
		eventsReceived: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "jetlet_container_events_total",
			Help: "Container events received from the runtime's event stream; each triggers a relist.",
		}),
		cache:  map[string]cacheEntry{},
		seen:   map[string]map[string]kubecontainer.ContainerState{},
		unread: map[string]podFailure{},
		dirty:  map[string]struct{}{},
		kick:   make(chan struct{}, 1),
		notify: make(chan struct{}, 1),
	}
	r.changed = sync.NewCond(&r.mu)
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(r.relistDuration, r.streamUp, r.eventsReceived)
	}
	return r, nil
}

// Changed is signalled when a relist found pods changed; TakeChanged
// returns them. A pod changed several times before it is taken is taken once.
func (r *Relister) Changed() <-chan struct{} { return r.notify }

// TakeChanged returns the pods changed since the last call.
func (r *Relister) TakeChanged() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	uids := make([]string, 0, len(r.dirty))
	for uid := range r.dirty {
		uids = append(uids, uid)
	}
	clear(r.dirty)
	return uids
}

// Run relists until ctx is done. The first relist happens at once.
func (r *Relister) Run(ctx context.Context) {
	if r.cfg.ContainerEvents != nil {
		go r.followEvents(ctx)
	}
	defer func() {
		r.mu.Lock()
		r.stopped = true
		r.changed.Broadcast()
		r.mu.Unlock()
	}()
	t := time.NewTimer(r.cfg.Period)
	defer t.Stop()
	for {
		r.relist(ctx)
		// The stream connecting or breaking asks for a relist, so the
		// period is chosen again at once.
		t.Reset(r.period())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
	}
}

func (r *Relister) relist(ctx context.Context) {
	start := time.Now()
	r.mu.Lock()
	r.asked = false
	covered := r.unseen
	r.mu.Unlock()

	pods, err := r.lister.GetPods(ctx, true)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn().Err(err).Msg("relist failed")
		}
		// Workers waiting for a fresher view get the failure instead.
		r.mu.Lock()
		r.failedAsOf, r.failure = start, err
		r.changed.Broadcast()
		r.mu.Unlock()
		return
	}
	now := map[string]map[string]kubecontainer.ContainerState{}
	byUID := map[string]*kubecontainer.RuntimePod{}
	for _, p := range pods {
		states := map[string]kubecontainer.ContainerState{}
		for _, c := range p.Containers {
			states[c.ID] = c.State
		}
		// A sandbox's state change is a change of the pod too.
		for _, s := range p.Sandboxes {
			states["sandbox/"+s.ID] = kubecontainer.ContainerState(s.State)
		}
		now[p.UID] = states
		byUID[p.UID] = p
	}

	var changed []string
	for uid, states := range now {
		if !maps.Equal(r.seen[uid], states) {
			changed = append(changed, uid)
		}
	}
	for uid := range r.seen {
		if _, ok := now[uid]; !ok {
			changed = append(changed, uid)
		}
	}

	for _, uid := range changed {
		p, present := byUID[uid]
		if !present {
			continue // its absence is what validAsOf will say
		}
		st, err := r.lister.GetPodStatus(ctx, uid, p.Name, p.Namespace)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn().Err(err).Str("uid", uid).Msg("relist: pod status")
			}
			now[uid] = r.seen[uid] // try again next relist
			// Its cached status is older than this relist: it must not pass
			// for fresh, and a worker waiting for it gets the error.
			r.mu.Lock()
			r.unread[uid] = podFailure{err: err, at: start}
			r.mu.Unlock()
			continue
		}
		r.emitFacts(ctx, st)
		if !r.put(uid, st, start) && !r.cachedShows(uid, now[uid]) {
			// A worker stored a status it began reading after this relist
			// began, but it read the runtime before this relist did (a
			// container that exited in between: it shows other states
			// than listed): this relist's change must not pass for seen,
			// or a stale entry would stay until the pod changes again. The
			// next relist reads it anew. One that shows what was listed
			// is read no more: during a burst of starts most read-backs
			// win, and each was read again.
			now[uid] = r.seen[uid]
		}
		r.mu.Lock()
		delete(r.unread, uid)
		r.mu.Unlock()
	}
	r.seen = now

	r.mu.Lock()
	r.validAsOf, r.failure = start, nil
	r.unseen -= covered
	for uid, e := range r.cache {
		// A pod the runtime holds nothing of needs no entry once a relist
		// covers its absence (unless a worker stored a newer one since): the
		// cache stays as large as the node.
		if _, present := now[uid]; !present && !e.at.After(start) {
			delete(r.cache, uid)
		}
	}
	for uid := range r.unread {
		if _, present := now[uid]; !present {
			delete(r.unread, uid)
		}
	}
	for _, uid := range changed {
		r.dirty[uid] = struct{}{}
	}
	r.changed.Broadcast()
	r.mu.Unlock()
	r.relistDuration.Observe(time.Since(start).Seconds())
	if len(changed) > 0 {
		select {
		case r.notify <- struct{}{}:
		default:
		}
	}
}

// Rederive emits again every fact of every pod the cache holds (see
// kubecontainer.PodFacts), with their deterministic ids, after events may have
// been lost; the publisher stores only those not stored yet.
func (r *Relister) Rederive(ctx context.Context) {
	r.mu.Lock()
	var statuses []*kubecontainer.PodStatus
	for _, e := range r.cache {
		statuses = append(statuses, e.status)
	}
	r.mu.Unlock()
	for _, st := range statuses {
		r.emitFacts(ctx, st)
	}
}

// emitFacts emits every fact the pod's status implies.
func (r *Relister) emitFacts(ctx context.Context, st *kubecontainer.PodStatus) {
	for _, ev := range kubecontainer.PodFacts(r.cfg.Node, st) {
		r.emit.Emit(ctx, ev)
	}
}

// put caches st (nil: the runtime holds nothing of the pod) as read at or
// after at, unless a newer entry is there; it reports whether it did.
func (r *Relister) put(uid string, st *kubecontainer.PodStatus, at time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.cache[uid]; ok && e.at.After(at) {
		return false
	}
	if st == nil {
		st = &kubecontainer.PodStatus{UID: uid}
	}
	r.cache[uid] = cacheEntry{status: st, at: at}
	return true
}

// cachedShows reports whether the cached status of pod uid shows its
// containers and sandboxes in the states listed (as relist keys them).
func (r *Relister) cachedShows(uid string, listed map[string]kubecontainer.ContainerState) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.cache[uid].status
	if st == nil || len(st.ContainerStatuses)+len(st.SandboxStatuses) != len(listed) {
		return false
	}
	for _, c := range st.ContainerStatuses {
		if state, ok := listed[c.ID]; !ok || state != c.State {
			return false
		}
	}
	for _, s := range st.SandboxStatuses {
		state := kubecontainer.ContainerExited
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			state = kubecontainer.ContainerRunning
		}
		if listed["sandbox/"+s.GetId()] != state {
			return false
		}
	}
	return true
}

// Store caches a status a pod worker read itself (after changing the pod).
func (r *Relister) Store(uid string, st *kubecontainer.PodStatus, at time.Time) { r.put(uid, st, at) }

// Status returns the pod's status as of t or later: from the cache when it
// is that fresh, else after a relist that starts after t (asked for at once).
// It returns nil for a pod the runtime holds nothing of.
func (r *Relister) Status(ctx context.Context, uid string, t time.Time) (*kubecontainer.PodStatus, error) {
	// A waiter must wake when its ctx ends, whoever else is waiting.
	defer condwake.OnDone(ctx, r.changed)()
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		e, cached := r.cache[uid]
		failed, unread := r.unread[uid]
		fresh := (cached && !e.at.Before(t)) ||
			(!unread && (!r.validAsOf.Before(t) || (r.live && r.unseen == 0 && !r.validAsOf.IsZero())))
		if fresh {
			if !cached {
				return nil, nil
			}
			return e.status, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("waiting for a relist: %w", err)
		}
		if r.failure != nil && !r.failedAsOf.Before(t) {
			return nil, fmt.Errorf("cannot read the pod's status: %w", r.failure)
		}
		if r.stopped {
			return nil, errRelistStopped
		}
		if unread && !failed.at.Before(t) {
			return nil, fmt.Errorf("cannot read the pod's status: %w", failed.err)
		}
		if !r.asked {
			r.asked = true
			r.askRelist()
		}
		r.changed.Wait()
	}
}

// period is the time to the next relist: EventedPeriod while the event
// stream is connected (an event relists at once), else Period.
func (r *Relister) period() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live {
		return r.cfg.EventedPeriod
	}
	return r.cfg.Period
}

// askRelist makes Run relist at once (without waiting for the period).
func (r *Relister) askRelist() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// followEvents keeps the event stream connected; each event asks for a
// relist at once. While it is connected the relists are EventedPeriod apart;
// when it breaks, a relist at once catches what it may have missed, and
// they are Period apart until it is back.
func (r *Relister) followEvents(ctx context.Context) {
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		// Whatever changed while the stream was down is caught by a relist
		// asked for as the stream comes up, before the cache counts as live.
		received := false
		err := r.cfg.ContainerEvents(ctx, func() {
			r.setLive(true)
			// containerd 1.6 gets here too: a stream is open before the
			// runtime answers its first receive with Unimplemented.
			r.log.Debug().Msg("container event stream open")
			r.askRelist()
		}, func() {
			r.mu.Lock()
			r.unseen++
			r.mu.Unlock()
			r.eventsReceived.Inc()
			if !received {
				received = true
				r.log.Info().Dur("relist_period_ms", r.cfg.EventedPeriod).
					Msg("evented PLEG on: relisting at each container event, and every relist period while the stream stays up")
			}
			r.askRelist()
		})
		r.setLive(false)
		r.askRelist()
		if errors.Is(err, ErrEventsUnsupported) {
			r.log.Info().Dur("relist_period_ms", r.cfg.Period).Msg("the runtime has no container event stream; relisting every period")
			return
		}
		if ctx.Err() != nil {
			return
		}
		r.log.Warn().Err(err).Dur("retry_in_ms", delay).Dur("relist_period_ms", r.cfg.Period).Msg("container event stream broke; relisting every period meanwhile")
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 10*time.Second)
	}
}

// setLive records whether the event stream is connected. Connecting counts
// as an event not yet relisted: the cache is live only once a relist that
// started after the stream opened has covered it.
func (r *Relister) setLive(live bool) {
	r.mu.Lock()
	r.live = live
	if live {
		r.unseen++
	}
	r.mu.Unlock()
	if live {
		r.streamUp.Set(1)
	} else {
		r.streamUp.Set(0)
	}
}
