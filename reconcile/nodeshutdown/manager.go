package nodeshutdown

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
)

// kubelet's words for a pod stopped by the node's shutdown, for a pod
// refused while the node shuts down, and for the node's Ready condition
// meanwhile.
const (
	Reason             = "Terminated"
	Message            = "Pod was terminated in response to imminent node shutdown."
	NotAdmittedReason  = "NodeShutdown"
	NotAdmittedMessage = "Pod was rejected as the node is shutting down."
	NotReadyReason     = "KubeletNotReady"
	NotReadyMessage    = "node is shutting down"
)

// PublishMargin is the time the node keeps, after the groups' grace
// periods, to store on the bus what the pods' ends published (their
// statuses and events) before it lets the host go down: logind is asked
// to wait for the groups' grace periods and this.
const PublishMargin = 5 * time.Second

// reconnectPeriod is how long the manager waits before it watches logind
// again once its connection to the system bus ended (kubelet's).
const reconnectPeriod = time.Second

// ErrInvalidConfig is returned by New for a configuration that cannot work.
var ErrInvalidConfig = errors.New("nodeshutdown: invalid config")

// Logind is the host's login manager, as the shutdown needs it: one
// connection to it (internal/logind's over D-Bus).
type Logind interface {
	// InhibitDelayMax is how long logind waits at most for a delay
	// inhibitor (InhibitDelayMaxUSec).
	InhibitDelayMax() (time.Duration, error)
	// RaiseInhibitDelayMax makes logind wait for at least d, or fails.
	RaiseInhibitDelayMax(ctx context.Context, d time.Duration) error
	// InhibitShutdown takes a delay inhibitor lock of shutdown; closing it
	// releases it.
	InhibitShutdown() (io.Closer, error)
	// PrepareForShutdown delivers logind's PrepareForShutdown signals: true
	// when the host is about to shut down, false when that was cancelled.
	// It is closed when the connection ends.
	PrepareForShutdown() (<-chan bool, error)
	Close() error
}

// ConnectFunc connects to logind.
type ConnectFunc func() (Logind, error)

// ActivePodLister lists the pods the node runs (the pod workers).
type ActivePodLister interface {
	ActivePods() []*corev1.Pod
}

// Killer ends a pod for the node's shutdown (the pod workers): its
// containers stopped with grace (their preStop hooks run), its status
// Failed with reason and message for good. It returns once the pod is
// stopped, or failed to be.
type Killer interface {
	EndForShutdown(ctx context.Context, uid string, gracePeriod int64, reason, message string) error
}

// FlushFunc waits until what was published is stored, or ctx is done.
type FlushFunc func(ctx context.Context) error

// Manager is kubelet's node shutdown manager. Create it with New and start
// Run; ShuttingDown and Changed may be used from any goroutine.
type Manager struct {
	connect ConnectFunc
	pods    ActivePodLister
	killer  Killer
	flush   FlushFunc
	groups  []PriorityGrace // by priority, low to high; none: disabled
	log     zerolog.Logger
	changed chan struct{}

	mu sync.Mutex
	// since is when the shutdown under way began; zero when there is none.
	// Guarded by mu.
	since time.Time
}

// New returns a manager for cfg, disabled when cfg is; it does no I/O:
// call Run.
func New(connect ConnectFunc, pods ActivePodLister, killer Killer, flush FlushFunc, cfg Config, log zerolog.Logger) (*Manager, error) {
	if connect == nil || pods == nil || killer == nil || flush == nil {
		return nil, fmt.Errorf("%w: the manager needs logind, the active pods, a killer and a flush", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &Manager{
		connect: connect, pods: pods, killer: killer, flush: flush,
		groups:  cfg.groups(),
		log:     log.With().Str("component", "nodeshutdown").Logger(),
		changed: make(chan struct{}, 1),
	}, nil
}

// ShuttingDown reports whether the host is shutting down, and since when.
func (m *Manager) ShuttingDown() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.since, !m.since.IsZero()
}

// Changed signals (without blocking, coalesced) that ShuttingDown changed.
func (m *Manager) Changed() <-chan struct{} { return m.changed }

func (m *Manager) setShuttingDown(on bool) {
	m.mu.Lock()
	if on {
		m.since = time.Now()
	} else {
		m.since = time.Time{}
	}
	m.mu.Unlock()
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Run holds logind's delay inhibitor lock and stops the pods when the host
// shuts down, until ctx is done. It returns at once when graceful shutdown
// is disabled, and with an error when logind cannot be used at start (no
// system bus, no logind, a delay it will not raise): the host then goes
// down without waiting, as kubelet's. Once started it watches logind again
// after a lost connection.
func (m *Manager) Run(ctx context.Context) error {
	if len(m.groups) == 0 {
		return nil
	}
	w, err := m.start(ctx)
	if err != nil {
		return err
	}
	m.log.Info().Any("groups", m.groups).Dur("inhibit_delay", requested(m.groups)+PublishMargin).
		Msg("graceful node shutdown: holding logind's delay inhibitor lock")
	for {
		m.watch(ctx, w)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(reconnectPeriod):
		}
		if w, err = m.start(ctx); err != nil {
			m.log.Error().Err(err).Msg("cannot watch logind again: the host would shut down without stopping the pods; retrying")
			w = nil
		}
	}
}

// watching is one connection to logind and what it holds.
type watching struct {
	conn   Logind
	events <-chan bool
	lock   io.Closer // nil while not held
}

// start connects to logind, raises its delay when it is below what the
// groups need (kubelet's OverrideInhibitDelay), takes the lock and
// subscribes to PrepareForShutdown.
func (m *Manager) start(ctx context.Context) (*watching, error) {
	conn, err := m.connect()
	if err != nil {
		return nil, fmt.Errorf("graceful node shutdown: connect to logind: %w", err)
	}
	w := &watching{conn: conn}
	if err := m.hold(ctx, w); err != nil {
		conn.Close()
		return nil, fmt.Errorf("graceful node shutdown: %w", err)
	}
	return w, nil
}

func (m *Manager) hold(ctx context.Context, w *watching) error {
	want := requested(m.groups) + PublishMargin
	delay, err := w.conn.InhibitDelayMax()
	if err != nil {
		return err
	}
	if delay < want {
		m.log.Info().Dur("was", delay).Dur("want", want).Msg("raising logind's InhibitDelayMaxSec to the shutdown grace period and the time to publish")
		if err := w.conn.RaiseInhibitDelayMax(ctx, want); err != nil {
			return fmt.Errorf("logind's InhibitDelayMaxSec is %s, below the %s the shutdown grace period and publishing need, and cannot be raised: %w", delay, want, err)
		}
	}
	if w.events, err = w.conn.PrepareForShutdown(); err != nil {
		return err
	}
	w.lock, err = w.conn.InhibitShutdown()
	return err
}

// watch waits for logind's signals until ctx is done or the connection
// ends, then releases what it holds.
func (m *Manager) watch(ctx context.Context, w *watching) {
	if w == nil {
		return
	}
	defer func() {
		m.release(w)
		w.conn.Close()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case down, ok := <-w.events:
			if !ok {
				m.log.Warn().Msg("the connection to logind ended: watching it again")
				return
			}
			m.setShuttingDown(down)
			if !down {
				// Cancelled: the next shutdown is waited for again.
				m.log.Info().Msg("logind cancelled the shutdown: pods are admitted again")
				if w.lock == nil {
					var err error
					if w.lock, err = w.conn.InhibitShutdown(); err != nil {
						m.log.Error().Err(err).Msg("cannot take logind's delay inhibitor lock again")
					}
				}
				continue
			}
			if w.lock == nil {
				// A second signal, or one without the lock: logind is not
				// waiting for this node.
				m.log.Warn().Msg("the host is shutting down and this node holds no delay inhibitor lock: pods are not stopped")
				continue
			}
			m.shutdown(ctx)
			m.release(w)
		}
	}
}

func (m *Manager) release(w *watching) {
	if w.lock == nil {
		return
	}
	if err := w.lock.Close(); err != nil {
		m.log.Warn().Err(err).Msg("release logind's delay inhibitor lock")
	}
	w.lock = nil
}

// shutdown stops the node's pods, group by group from the lowest priority
// up, each group given its grace period (kubelet's processShutdownEvent):
// once a group's pods have stopped, or its grace period is over, the next
// group begins. Then it waits, up to PublishMargin after the groups' grace
// periods, for the pods' statuses and events to be stored.
func (m *Manager) shutdown(ctx context.Context) {
	start := time.Now()
	groups := groupByPriority(m.groups, m.pods.ActivePods())
	m.log.Warn().Int("pods", countPods(groups)).Msg("the host is shutting down: stopping the node's pods")
	for _, g := range groups {
		if len(g.pods) == 0 {
			continue // no pods, no wait
		}
		m.stopGroup(ctx, g)
	}
	flushCtx, cancel := context.WithDeadline(ctx, start.Add(requested(m.groups)+PublishMargin))
	defer cancel()
	if err := m.flush(flushCtx); err != nil {
		m.log.Warn().Err(err).Msg("not every status and event of the stopped pods was stored before the host goes down")
	}
	m.log.Info().Dur("took", time.Since(start)).Msg("the node's pods are stopped: letting the host shut down")
}

// stopGroup stops g's pods at once and waits until they have stopped or g's
// grace period is over.
func (m *Manager) stopGroup(ctx context.Context, g podGroup) {
	var wg sync.WaitGroup
	for _, pod := range g.pods {
		wg.Go(func() {
			grace := podGrace(pod, g.PriorityGrace)
			log := m.log.With().Str("uid", string(pod.UID)).Str("pod", pod.Namespace+"/"+pod.Name).Int64("grace_seconds", grace).Logger()
			log.Info().Msg("stopping a pod for the node's shutdown")
			if err := m.killer.EndForShutdown(ctx, string(pod.UID), grace, Reason, Message); err != nil {
				log.Warn().Err(err).Msg("the pod did not stop for the node's shutdown")
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	timer := time.NewTimer(time.Duration(g.GracePeriodSeconds) * time.Second)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		m.log.Warn().Int32("priority", g.Priority).Int64("grace_seconds", g.GracePeriodSeconds).
			Msg("the group's grace period is over before its pods stopped: the next group begins")
	case <-ctx.Done():
	}
}

func countPods(groups []podGroup) int {
	n := 0
	for _, g := range groups {
		n += len(g.pods)
	}
	return n
}
