package prober

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// Kubelet's defaults of a probe's fields, for pods that come without the API
// server's defaulting.
const (
	defaultPeriod           = 10 * time.Second
	defaultTimeout          = time.Second
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
)

// worker probes one probe of one container instance, after kubelet's
// prober worker: from the instance's start plus initialDelaySeconds, every
// periodSeconds, turning successThreshold successes or failureThreshold
// failures in a row into a result. Its fields are set before run and read
// only, except those marked as the run goroutine's.
type worker struct {
	m    *Prober
	kind schemas.ProbeKind
	// Immutable after newWorker.
	probe       *corev1.Probe
	container   *corev1.Container
	pod         *kubecontainer.PodStatus // uid, namespace and name, for events
	instance    *kubecontainer.ContainerStatus
	containerID string
	podIP       string
	// noPodIP: the pod is on a network of its own but has no IP (the
	// runtime's pod network is down): what would go to the pod's IP fails
	// rather than reach the node's own ports, where an empty host dials.
	noPodIP      bool
	startedAt    time.Time
	initialDelay time.Duration
	period       time.Duration
	timeout      time.Duration
	successes    int
	failures     int
	results      *Results

	ctx    context.Context
	cancel context.CancelFunc

	// The run goroutine's.
	// gated: the container has a startup probe, which has not yet been seen
	// to succeed; this liveness or readiness probe waits for it. Once seen,
	// it stays open: a pod being deleted keeps probing readiness after its
	// startup worker stopped.
	gated   bool
	last    kubecontainer.ProbeResult // the last probe's result
	inARow  int                       // how many probes in a row gave last
	verdict kubecontainer.ProbeResult // the last result set in the cache by this worker
}

func newWorker(m *Prober, kind schemas.ProbeKind, t target, pod *kubecontainer.PodStatus, podIP string, noPodIP bool) *worker {
	p, c, cs := t.probe, t.container, t.instance
	w := &worker{
		m: m, kind: kind, probe: p, container: c,
		pod:          &kubecontainer.PodStatus{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name},
		instance:     cs,
		containerID:  cs.ID,
		podIP:        podIP,
		noPodIP:      noPodIP,
		startedAt:    cs.StartedAt,
		initialDelay: seconds(p.InitialDelaySeconds, 0),
		period:       seconds(p.PeriodSeconds, defaultPeriod),
		timeout:      seconds(p.TimeoutSeconds, defaultTimeout),
		successes:    threshold(p.SuccessThreshold, defaultSuccessThreshold),
		failures:     threshold(p.FailureThreshold, defaultFailureThreshold),
		gated:        kind != schemas.ProbeStartup && c.StartupProbe != nil,
		results:      m.results(kind),
	}
	w.ctx, w.cancel = context.WithCancel(m.base)
	return w
}

func seconds(v int32, def time.Duration) time.Duration {
	if v <= 0 {
		return def
	}
	return time.Duration(v) * time.Second
}

func threshold(v int32, def int) int {
	if v <= 0 {
		return def
	}
	return int(v)
}

// initialResult is the result before any probe, kubelet's: a container is
// not ready until its readiness probe succeeds, alive until its liveness
// probe fails, and of unknown start until its startup probe answers.
func (w *worker) initialResult() kubecontainer.ProbeResult {
	switch w.kind {
	case schemas.ProbeReadiness:
		return kubecontainer.ProbeFailure
	case schemas.ProbeLiveness:
		return kubecontainer.ProbeSuccess
	}
	return kubecontainer.ProbeUnknown
}

// stop ends the worker; its goroutine then drops its result.
func (w *worker) stop() { w.cancel() }

func (w *worker) run() {
	w.results.claim(w, w.initialResult())
	defer w.results.release(w)

	delay := max(time.Until(w.startedAt.Add(w.initialDelay)), 0)
	if time.Since(w.m.start) < w.period {
		delay += rand.N(w.period)
	}
	first := time.NewTimer(delay)
	defer first.Stop()
	select {
	case <-w.ctx.Done():
		return
	case <-first.C:
	}
	tick := time.NewTicker(w.period)
	defer tick.Stop()
	for w.probeOnce() {
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
	}
	// On hold (a liveness or startup failure: the result stands until the
	// instance goes) or done (startup succeeded): wait to be stopped.
	<-w.ctx.Done()
}

// probeOnce runs the probe once and records its result; false ends the
// probing of this instance.
func (w *worker) probeOnce() bool {
	if w.gated {
		if r, ok := w.m.startup.Get(w.containerID); !ok || r != kubecontainer.ProbeSuccess {
			return true // not started yet: kubelet's startup gate
		}
		w.gated = false
	}
	at := time.Now()
	out, err := w.handle()
	if err != nil {
		if w.ctx.Err() != nil {
			return false
		}
		// The handler could not run: kubelet says so in an Unhealthy event
		// ("probe errored", apart from a failure) and throws the result
		// away, counting it neither way.
		w.m.log.Debug().Err(err).Str("uid", w.pod.UID).Str("container", w.container.Name).
			Str("probe", string(w.kind)).Msg("probe not run")
		w.m.unhealthy(w, string(w.kind)+" probe errored: "+err.Error(), at)
		return true
	}
	result := kubecontainer.ProbeFailure
	if out.OK {
		result = kubecontainer.ProbeSuccess
	} else {
		w.m.unhealthy(w, string(w.kind)+" probe failed: "+out.Message, at) // every failed run, as kubelet's prober
	}
	if result == w.last {
		w.inARow++
	} else {
		w.last, w.inARow = result, 1
	}
	if (result == kubecontainer.ProbeFailure && w.inARow < w.failures) || (result == kubecontainer.ProbeSuccess && w.inARow < w.successes) {
		return true
	}
	w.verdict = result
	if w.results.set(w, result) {
		w.m.notify(w.pod.UID, Change{
			Sync:   result == kubecontainer.ProbeFailure && w.kind != schemas.ProbeReadiness,
			Status: w.kind != schemas.ProbeLiveness,
		})
	}
	switch {
	case result == kubecontainer.ProbeFailure && w.kind != schemas.ProbeReadiness:
		return false // kubelet's onHold: the sync kills this instance
	case result == kubecontainer.ProbeSuccess && w.kind == schemas.ProbeStartup:
		return false // started: the startup probe is done
	}
	return true
}

var (
	errNoHandler = errors.New("the probe has no handler (exec, httpGet, tcpSocket or grpc)")
	errNoPodIP   = errors.New("the pod has no IP: the runtime's pod network is not ready")
)

// handle runs the probe's handler against the instance, within the timeout.
func (w *worker) handle() (kubecontainer.HandlerOutcome, error) {
	ctx, p, r := w.ctx, w.probe, w.m.runner
	switch {
	case p.Exec != nil:
		return r.Exec(ctx, w.containerID, p.Exec.Command, w.timeout)
	case w.noPodIP && (p.HTTPGet != nil && p.HTTPGet.Host == "" || p.TCPSocket != nil && p.TCPSocket.Host == "" || p.GRPC != nil):
		return kubecontainer.HandlerOutcome{}, errNoPodIP
	case p.HTTPGet != nil:
		u, header, err := kubecontainer.ResolveHTTPGet(p.HTTPGet, w.container, w.podIP)
		if err != nil {
			return kubecontainer.HandlerOutcome{}, err
		}
		return r.HTTPGet(ctx, u, header, w.timeout)
	case p.TCPSocket != nil:
		hostPort, err := kubecontainer.ResolveTCPSocket(p.TCPSocket, w.container, w.podIP)
		if err != nil {
			return kubecontainer.HandlerOutcome{}, err
		}
		return r.TCPSocket(ctx, hostPort, w.timeout)
	case p.GRPC != nil:
		hostPort, service := kubecontainer.ResolveGRPC(p.GRPC, w.podIP)
		return r.GRPC(ctx, hostPort, service, w.timeout)
	}
	return kubecontainer.HandlerOutcome{}, errNoHandler
}
