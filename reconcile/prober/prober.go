// Package prober is kubelet's prober manager for jetlet, Prober: one worker
// goroutine per (pod, container instance, probe kind), started when the
// instance runs and stopped when it goes, probing outside the pod sync
// through a kubecontainer.HandlerRunner. Its results caches are what
// reconcile.Config's Liveness, Readiness and Startup read; its changes tell
// the pod workers which pods need a sync (a liveness or startup failure: the
// sync kills the container) and which only a new status (readiness or
// startup changed).
package prober

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// Change is what a pod needs after its probe results changed.
type Change struct {
	// Sync: a liveness or startup probe failed; the sync kills the container.
	Sync bool
	// Status: a readiness or startup result changed; the pod's status (ready,
	// started, conditions) is written again, without a sync.
	Status bool
}

// Config configures a Prober.
type Config struct {
	// Node names the node in Unhealthy events.
	Node   string
	Logger zerolog.Logger
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("invalid prober config")

// Validate reports the first setting that cannot work. (Nothing has a
// default: the zero Logger logs nothing.)
func (c *Config) Validate() error {
	if !schemas.ValidNodeName(c.Node) {
		return fmt.Errorf("%w: node %q is not a DNS-1123 label", ErrInvalidConfig, c.Node)
	}
	return nil
}

// Prober runs the probes of the node's running containers.
type Prober struct {
	runner kubecontainer.HandlerRunner
	emit   kubecontainer.Emitter
	cfg    Config
	log    zerolog.Logger

	liveness, readiness, startup *Results
	events                       *correlator // rate-limits the Unhealthy events

	// start: workers started within a period of it wait a random part of
	// their period first, so that a restarted jetlet does not probe every
	// container at once (kubelet's rule).
	start time.Time
	// base is the parent of every worker's context; Stop cancels it.
	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	signal chan struct{} // capacity 1: changes are waiting

	mu      sync.Mutex
	pods    map[string]map[workerKey]*worker // by pod uid; guarded by mu
	changes map[string]Change                // by pod uid, not yet taken; guarded by mu
}

type workerKey struct {
	container string
	kind      schemas.ProbeKind
}

// target is one probe of a running container instance: what a worker probes.
type target struct {
	probe     *corev1.Probe
	container *corev1.Container
	instance  *kubecontainer.ContainerStatus
}

// New returns a Prober whose workers run handlers with runner and emit
// Unhealthy events to emit. It does no I/O; workers start with UpdatePod. It
// refuses a nil runner or emitter and a config that cannot work
// (ErrInvalidConfig).
func New(runner kubecontainer.HandlerRunner, emit kubecontainer.Emitter, cfg Config) (*Prober, error) {
	if runner == nil {
		return nil, fmt.Errorf("%w: nil HandlerRunner", ErrInvalidConfig)
	}
	if emit == nil {
		return nil, fmt.Errorf("%w: nil Emitter", ErrInvalidConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, cancel := context.WithCancel(context.Background())
	return &Prober{
		runner: runner, emit: emit, cfg: cfg,
		log:       cfg.Logger.With().Str("component", "prober").Logger(),
		liveness:  newResults(),
		readiness: newResults(),
		startup:   newResults(),
		events:    newCorrelator(),
		start:     time.Now(),
		base:      base,
		cancel:    cancel,
		signal:    make(chan struct{}, 1),
		pods:      map[string]map[workerKey]*worker{},
		changes:   map[string]Change{},
	}, nil
}

// Liveness, Readiness and Startup are the results caches, for reconcile.Config.
func (m *Prober) Liveness() kubecontainer.ProbeResults  { return m.liveness }
func (m *Prober) Readiness() kubecontainer.ProbeResults { return m.readiness }
func (m *Prober) Startup() kubecontainer.ProbeResults   { return m.startup }

func (m *Prober) results(kind schemas.ProbeKind) *Results {
	switch kind {
	case schemas.ProbeLiveness:
		return m.liveness
	case schemas.ProbeReadiness:
		return m.readiness
	}
	return m.startup
}

// Changed is signalled when some pod's results changed; TakeChanged says which.
func (m *Prober) Changed() <-chan struct{} { return m.signal }

// TakeChanged returns the pods whose results changed since the last call,
// with what each needs.
func (m *Prober) TakeChanged() map[string]Change {
	m.mu.Lock()
	defer m.mu.Unlock()
	taken := m.changes
	m.changes = map[string]Change{}
	return taken
}

func (m *Prober) notify(uid string, c Change) {
	m.mu.Lock()
	old := m.changes[uid]
	m.changes[uid] = Change{Sync: old.Sync || c.Sync, Status: old.Status || c.Status}
	m.mu.Unlock()
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

// unhealthy emits the Unhealthy event of w's probe run at t that failed or
// could not run, with message, unless the pod's events are rate-limited.
func (m *Prober) unhealthy(w *worker, message string, t time.Time) {
	msg, ok := m.events.correlate(w.pod.UID, message, t)
	if !ok {
		return
	}
	m.emit.Emit(w.ctx, kubecontainer.UnhealthyEvent(m.cfg.Node, w.pod, w.instance, w.kind, msg, t))
}

// UpdatePod tells the prober what runs of the pod: each running instance of
// a container with probes gets its workers (a new instance replaces the old
// one's), and the workers of instances that no longer run stop and drop their
// results. Call it after every sync of the pod, with the status it saw.
func (m *Prober) UpdatePod(pod *corev1.Pod, status *kubecontainer.PodStatus) {
	uid := string(pod.UID)
	var podIP string
	if len(status.IPs) > 0 {
		podIP = status.IPs[0]
	}
	want := map[workerKey]target{}
	add := func(c *corev1.Container) {
		cs := status.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != kubecontainer.ContainerRunning {
			return
		}
		for kind, p := range map[schemas.ProbeKind]*corev1.Probe{
			schemas.ProbeLiveness: c.LivenessProbe, schemas.ProbeReadiness: c.ReadinessProbe, schemas.ProbeStartup: c.StartupProbe,
		} {
			if p != nil {
				want[workerKey{c.Name, kind}] = target{probe: p, container: c, instance: cs}
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		// Sidecars (restartable init containers) are probed like app
		// containers; other init containers have no probes.
		if c := &pod.Spec.InitContainers[i]; kubecontainer.IsSidecar(c) {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if m.base.Err() != nil {
		return // stopped
	}
	running := m.pods[uid]
	for key, w := range running {
		if t, ok := want[key]; !ok || t.instance.ID != w.containerID {
			w.stop()
			delete(running, key)
		}
	}
	for key, t := range want {
		if _, ok := running[key]; ok {
			continue
		}
		w := newWorker(m, key.kind, t, status, podIP, podIP == "" && !pod.Spec.HostNetwork)
		if running == nil {
			running = map[workerKey]*worker{}
			m.pods[uid] = running
		}
		running[key] = w
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			w.run()
		}()
	}
	if len(running) == 0 {
		delete(m.pods, uid)
	}
}

// StopLivenessAndStartup stops the liveness and startup workers of a pod
// being deleted, as kubelet's: it is killed anyway, while its readiness is
// still probed, so that its containers turn unready as they stop answering.
func (m *Prober) StopLivenessAndStartup(uid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, w := range m.pods[uid] {
		if key.kind != schemas.ProbeReadiness {
			w.stop()
			delete(m.pods[uid], key)
		}
	}
	if len(m.pods[uid]) == 0 {
		delete(m.pods, uid)
	}
}

// RemovePod stops every worker of the pod (it is gone).
func (m *Prober) RemovePod(uid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.pods[uid] {
		w.stop()
	}
	delete(m.pods, uid)
	delete(m.changes, uid)
	m.events.forget(uid)
}

// Stop stops every worker and waits until they have ended.
func (m *Prober) Stop() {
	m.mu.Lock()
	m.cancel()
	m.pods = map[string]map[workerKey]*worker{}
	m.mu.Unlock()
	m.wg.Wait()
}

// workers counts the running workers (tests).
func (m *Prober) workers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, ws := range m.pods {
		n += len(ws)
	}
	return n
}
