package eviction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/jetlet/jetlet/schemas"
)

// ErrInvalidConfig wraps every refusal of a configuration.
var ErrInvalidConfig = errors.New("invalid eviction config")

// Defaults, kubelet's.
const (
	// DefaultPeriod is how often the manager synchronizes (kubelet's
	// housekeeping interval).
	DefaultPeriod = 10 * time.Second
	// DefaultPressureTransitionPeriod is --eviction-pressure-transition-period's.
	DefaultPressureTransitionPeriod = 5 * time.Minute
	// hardEvictionGracePeriodSeconds is the grace period of an eviction for
	// a hard threshold (kubelet's immediateEvictionGracePeriodSeconds).
	hardEvictionGracePeriodSeconds = 1
)

// The roles the manager acts through; the agent wires them.

// ImageGC deletes the images no container uses (the image GC manager).
type ImageGC interface {
	DeleteUnusedImages(ctx context.Context) (freedBytes int64, err error)
}

// ContainerGC removes every dead container and sandbox (the container GC).
type ContainerGC interface {
	DeleteAllUnusedContainers(ctx context.Context) error
}

// Reclaimer frees disk without evicting pods. Two collectors combine as
// struct{ImageGC; ContainerGC}.
type Reclaimer interface {
	ContainerGC
	ImageGC
}

// ActivePodLister lists the pods admitted and not terminal (the pod
// workers'), the candidates for eviction.
type ActivePodLister interface {
	ActivePods() []*corev1.Pod
}

// Killer evicts a pod: its status becomes phase Failed with reason and
// message, and it is killed with gracePeriod (seconds) overriding its own.
// Evict returns once the pod is killed, or failed to be.
type Killer interface {
	Evict(ctx context.Context, uid string, gracePeriod int64, reason, message string) error
}

// Config configures a Manager.
type Config struct {
	// Thresholds are what ParseThresholds made of the flags. None: the
	// manager observes nothing and every condition stays False.
	Thresholds []Threshold
	// Period between synchronizations. Default DefaultPeriod.
	Period time.Duration
	// PressureTransitionPeriod is how long a condition stays True after a
	// threshold of it was last met (--eviction-pressure-transition-period).
	// 0 is the default, 5m, as kubelet converts it.
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds caps a pod's own grace period when it is
	// evicted for a soft threshold (--eviction-max-pod-grace-period); 0,
	// the default, kills at once.
	MaxPodGracePeriodSeconds int64
	// Clock drives grace periods and transition times. Default: the wall clock.
	Clock clock.PassiveClock
	// Logger is used with component=eviction. The zero value logs nothing.
	Logger zerolog.Logger
}

func (c *Config) setDefaults() {
	if c.Period == 0 {
		c.Period = DefaultPeriod
	}
	if c.PressureTransitionPeriod == 0 {
		c.PressureTransitionPeriod = DefaultPressureTransitionPeriod
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
}

// Validate refuses a configuration that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.Period < 0:
		return fmt.Errorf("%w: period %v must not be negative", ErrInvalidConfig, c.Period)
	case c.PressureTransitionPeriod < 0:
		return fmt.Errorf("%w: eviction pressure transition period %v must not be negative", ErrInvalidConfig, c.PressureTransitionPeriod)
	case c.MaxPodGracePeriodSeconds < 0:
		return fmt.Errorf("%w: eviction max pod grace period %d must not be negative", ErrInvalidConfig, c.MaxPodGracePeriodSeconds)
	}
	return nil
}

// Manager is kubelet's eviction manager. Create it with New and start Run;
// Conditions, Pressure and Changed may be used from any goroutine.
type Manager struct {
	observer  Observer
	reclaimer Reclaimer
	pods      ActivePodLister
	killer    Killer
	cfg       Config
	log       zerolog.Logger
	changed   chan struct{}

	// Owned by synchronize, which only Run's goroutine calls.
	// thresholdsFirstObservedAt: when each threshold met now was first met.
	thresholdsFirstObservedAt map[Threshold]time.Time
	// conditionsLastObservedAt: when a threshold of each condition was last met.
	conditionsLastObservedAt map[corev1.NodeConditionType]time.Time
	// unresolved: thresholds met (their grace periods over) at the last
	// synchronize, met until their minimum reclaim is available again.
	unresolved []Threshold

	mu sync.Mutex // guards conditions
	// conditions are the pressure conditions in pressureConditions' order.
	conditions []schemas.NodeCondition
}

// New returns a manager; every dependency is required. It does no I/O: call
// Run. Until the first synchronize every condition is False.
func New(observer Observer, reclaimer Reclaimer, pods ActivePodLister, killer Killer, cfg Config) (*Manager, error) {
	if observer == nil || reclaimer == nil || pods == nil || killer == nil {
		return nil, fmt.Errorf("%w: the manager needs an observer, a reclaimer, the active pods and a killer", ErrInvalidConfig)
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{
		observer:                  observer,
		reclaimer:                 reclaimer,
		pods:                      pods,
		killer:                    killer,
		cfg:                       cfg,
		log:                       cfg.Logger.With().Str("component", "eviction").Logger(),
		changed:                   make(chan struct{}, 1),
		thresholdsFirstObservedAt: map[Threshold]time.Time{},
		conditionsLastObservedAt:  map[corev1.NodeConditionType]time.Time{},
	}
	for _, t := range cfg.Thresholds {
		if isContainerFs(t.Signal) {
			m.log.Warn().Stringer("threshold", t).Msg("containerfs thresholds are nodefs's or imagefs's, as kubelet sets them: this one is ignored")
		}
	}
	now := cfg.Clock.Now()
	for _, t := range pressureConditions {
		m.conditions = append(m.conditions, pressureCondition(t, false, now))
	}
	return m, nil
}

// Run synchronizes at once and then a period after each synchronize, until
// ctx is done.
func (m *Manager) Run(ctx context.Context) {
	if len(m.cfg.Thresholds) == 0 {
		m.log.Info().Msg("no eviction thresholds: the node's pressure is not watched")
		return
	}
	for {
		m.synchronize(ctx)
		timer := time.NewTimer(m.cfg.Period)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// synchronize is kubelet's control loop, once: observe; find the thresholds
// met (a threshold met before stays met until its minimum reclaim is back);
// set the conditions; for the thresholds whose grace periods are over,
// reclaim what the node can without pods, and when that is not enough,
// evict one pod. It returns the pod it evicted, if any.
func (m *Manager) synchronize(ctx context.Context) *corev1.Pod {
	obs, err := m.observer.Observe(ctx)
	if err != nil {
		m.log.Error().Err(err).Msg("observe the node")
		return nil
	}
	thresholds := containerFsThresholds(m.cfg.Thresholds, obs.DedicatedImageFs, obs.SplitContainerFs)
	met := thresholdsMet(thresholds, obs.Signals, false)
	met = mergeThresholds(met, thresholdsMet(m.unresolved, obs.Signals, true))

	now := m.cfg.Clock.Now()
	m.thresholdsFirstObservedAt = thresholdsFirstObservedAt(met, m.thresholdsFirstObservedAt, now)
	m.conditionsLastObservedAt = nodeConditionsLastObservedAt(nodeConditions(met), m.conditionsLastObservedAt, now)
	m.setPressure(nodeConditionsObservedSince(m.conditionsLastObservedAt, m.cfg.PressureTransitionPeriod, now), now)

	due := thresholdsMetGracePeriod(met, m.thresholdsFirstObservedAt, now)
	m.unresolved = due
	if len(due) == 0 {
		return nil
	}
	due = slices.Clone(due)
	sortByEvictionPriority(due)
	reclaim := due[0]
	starved := signalResource[reclaim.Signal]
	m.log.Info().Stringer("threshold", reclaim).Str("resource", string(starved)).Msg("attempting to reclaim")

	if m.reclaimNodeLevelResources(ctx, reclaim.Signal, obs, thresholds) {
		m.log.Info().Str("resource", string(starved)).Msg("reclaimed enough without evicting pods")
		return nil
	}
	return m.evictOne(ctx, reclaim, due, obs)
}

// reclaimNodeLevelResources deletes dead containers and unused images where
// that frees the file system under pressure (kubelet's
// buildSignalToNodeReclaimFuncs, nodeReclaims). It says whether none of
// thresholds is met any more, minimum reclaims included.
func (m *Manager) reclaimNodeLevelResources(ctx context.Context, signal Signal, obs Observations, thresholds []Threshold) bool {
	containers, images := nodeReclaims(signal, obs.DedicatedImageFs, obs.SplitContainerFs)
	if !containers && !images {
		return false
	}
	if containers {
		if err := m.reclaimer.DeleteAllUnusedContainers(ctx); err != nil {
			m.log.Warn().Err(err).Msg("delete dead containers to reclaim disk")
		}
	}
	if images {
		if freed, err := m.reclaimer.DeleteUnusedImages(ctx); err != nil {
			m.log.Warn().Err(err).Msg("delete unused images to reclaim disk")
		} else {
			m.log.Info().Int64("freed_bytes", freed).Msg("deleted unused images")
		}
	}
	obs, err := m.observer.Observe(ctx)
	if err != nil {
		m.log.Error().Err(err).Msg("observe the node after reclaiming")
		return false
	}
	return len(thresholdsMet(thresholds, obs.Signals, true)) == 0
}

// nodeReclaims is what kubelet's buildSignalToNodeReclaimFuncs frees for
// pressure on signal: on one file system, dead containers and unused images
// for nodefs and imagefs; with a dedicated image file system, both for
// imagefs and nothing for nodefs (logs and volumes, which only evictions
// free); with images split from writable layers (KEP-4191), unused images
// for imagefs and dead containers for nodefs. containerfs, memory and PIDs
// have nothing to reclaim: pods are evicted.
func nodeReclaims(signal Signal, dedicatedImageFs, splitContainerFs bool) (containers, images bool) {
	nodeFs := signal == SignalNodeFsAvailable || signal == SignalNodeFsInodesFree
	imageFs := signal == SignalImageFsAvailable || signal == SignalImageFsInodesFree
	switch {
	case dedicatedImageFs && splitContainerFs:
		return nodeFs, imageFs
	case dedicatedImageFs:
		return imageFs, imageFs
	default:
		return nodeFs || imageFs, nodeFs || imageFs
	}
}

// evictOne ranks the active pods for reclaim's signal and evicts the first
// that is not critical. due are the thresholds met, for the message.
func (m *Manager) evictOne(ctx context.Context, reclaim Threshold, due []Threshold, obs Observations) *corev1.Pod {
	pods := slices.Clone(m.pods.ActivePods())
	if len(pods) == 0 {
		m.log.Error().Stringer("threshold", reclaim).Msg("eviction thresholds are met, but no pods are active to evict")
		return nil
	}
	usage, err := m.observer.PodUsage(ctx)
	if err != nil {
		m.log.Error().Err(err).Msg("measure pods' usage: ranking them by priority alone")
	}
	rankPods(pods, reclaim.Signal, usage, obs.DedicatedImageFs, obs.SplitContainerFs)
	starved := signalResource[reclaim.Signal]
	for _, pod := range pods {
		if IsCritical(pod) {
			m.log.Error().Str("pod", pod.Namespace+"/"+pod.Name).Msg("cannot evict a critical pod")
			continue
		}
		podUsage, measured := usage[string(pod.UID)]
		message := evictionMessage(starved, pod, podUsage, measured, due, obs.Signals)
		grace := m.evictionGracePeriod(reclaim, pod)
		m.log.Info().Str("pod", pod.Namespace+"/"+pod.Name).Str("uid", string(pod.UID)).Int64("grace_period", grace).Str("message", message).Msg("evicting pod")
		if err := m.killer.Evict(ctx, string(pod.UID), grace, Reason, message); err != nil {
			m.log.Error().Err(err).Str("pod", pod.Namespace+"/"+pod.Name).Msg("evict pod")
		}
		return pod // one pod per synchronize, even one that failed to die
	}
	m.log.Error().Stringer("threshold", reclaim).Msg("unable to evict any pods from the node")
	return nil
}

// evictionGracePeriod is kubelet's: next to none for a hard threshold; for
// a soft one the pod's own, capped at MaxPodGracePeriodSeconds.
func (m *Manager) evictionGracePeriod(t Threshold, pod *corev1.Pod) int64 {
	if t.hard() {
		return hardEvictionGracePeriodSeconds
	}
	grace := m.cfg.MaxPodGracePeriodSeconds
	if own := pod.Spec.TerminationGracePeriodSeconds; own != nil {
		grace = min(grace, *own)
	}
	return grace
}
