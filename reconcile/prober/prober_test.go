package prober

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// fakeRunner answers each handler with what healthy says of the target (a
// container id for exec, the URL or host:port otherwise) at that moment, and
// records when each target was probed. Pure logic: the handlers themselves
// are tested against real servers in runtime/probe.
type fakeRunner struct {
	mu      sync.Mutex
	healthy map[string]bool        // guarded by mu
	broken  map[string]error       // the handler cannot run; guarded by mu
	calls   map[string][]time.Time // guarded by mu
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{healthy: map[string]bool{}, broken: map[string]error{}, calls: map[string][]time.Time{}}
}

func (f *fakeRunner) set(target string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.healthy[target] = ok
}

// breakWith makes the handler of target error (nil: run again).
func (f *fakeRunner) breakWith(target string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken[target] = err
}

func (f *fakeRunner) probed(target string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls[target]...)
}

func (f *fakeRunner) answer(target string) (kubecontainer.HandlerOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[target] = append(f.calls[target], time.Now())
	if err := f.broken[target]; err != nil {
		return kubecontainer.HandlerOutcome{}, err
	}
	if f.healthy[target] {
		return kubecontainer.HandlerOutcome{OK: true}, nil
	}
	return kubecontainer.HandlerOutcome{Message: target + " is unwell"}, nil
}

func (f *fakeRunner) Exec(_ context.Context, id string, cmd []string, _ time.Duration) (kubecontainer.HandlerOutcome, error) {
	return f.answer(id + " " + cmd[0])
}

func (f *fakeRunner) HTTPGet(_ context.Context, u *url.URL, _ http.Header, _ time.Duration) (kubecontainer.HandlerOutcome, error) {
	return f.answer(u.String())
}

func (f *fakeRunner) TCPSocket(_ context.Context, hostPort string, _ time.Duration) (kubecontainer.HandlerOutcome, error) {
	return f.answer("tcp " + hostPort)
}

func (f *fakeRunner) GRPC(_ context.Context, hostPort, service string, _ time.Duration) (kubecontainer.HandlerOutcome, error) {
	return f.answer("grpc " + hostPort + " " + service)
}

type recorder struct {
	mu     sync.Mutex
	events []schemas.LifecycleEvent // guarded by mu
}

func (r *recorder) Emit(_ context.Context, ev schemas.LifecycleEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) all() []schemas.LifecycleEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]schemas.LifecycleEvent(nil), r.events...)
}

func execProbe(cmd string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}},
		PeriodSeconds: period, FailureThreshold: failures,
	}
}

func testPod(c corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "u1", Name: "web", Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
	}
}

// running is the pod's status with one running instance id of container c,
// started now.
func running(c, id string) *kubecontainer.PodStatus {
	return &kubecontainer.PodStatus{UID: "u1", Name: "web", Namespace: "default", IPs: []string{"10.0.0.5"},
		ContainerStatuses: []*kubecontainer.ContainerStatus{{ID: id, Name: c, SandboxID: "sb", State: kubecontainer.ContainerRunning, StartedAt: time.Now()}}}
}

func get(r kubecontainer.ProbeResults, id string) kubecontainer.ProbeResult {
	res, _ := r.Get(id)
	return res
}

// newProber is New, failing the test on a refusal.
func newProber(t *testing.T, runner kubecontainer.HandlerRunner, emit kubecontainer.Emitter, cfg Config) *Prober {
	t.Helper()
	p, err := New(runner, emit, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		name   string
		runner kubecontainer.HandlerRunner
		emit   kubecontainer.Emitter
		cfg    Config
	}{
		{"no runner", nil, &recorder{}, Config{Node: "n1"}},
		{"no emitter", newFakeRunner(), nil, Config{Node: "n1"}},
		{"no node", newFakeRunner(), &recorder{}, Config{}},
		{"node not a DNS-1123 label", newFakeRunner(), &recorder{}, Config{Node: "node.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p, err := New(tc.runner, tc.emit, tc.cfg); !errors.Is(err, ErrInvalidConfig) || p != nil {
				t.Errorf("New = %v, %v; want nil, ErrInvalidConfig", p, err)
			}
		})
	}
}

// harness builds a Prober in a synctest bubble, past the start-up jitter.
func harness(t *testing.T) (*Prober, *fakeRunner, *recorder) {
	t.Helper()
	runner, rec := newFakeRunner(), &recorder{}
	m := newProber(t, runner, rec, Config{Node: "n1"})
	t.Cleanup(m.Stop)
	time.Sleep(time.Hour) // long after jetlet started: no jitter
	return m, runner, rec
}

func TestLivenessFailureAfterThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, runner, rec := harness(t)
		runner.set("c1 check", true)
		m.UpdatePod(testPod(corev1.Container{Name: "app", LivenessProbe: execProbe("check", 1, 3)}), running("app", "c1"))
		synctest.Wait()
		if got := get(m.Liveness(), "c1"); got != kubecontainer.ProbeSuccess {
			t.Fatalf("initial liveness %v, want success", got)
		}
		time.Sleep(2500 * time.Millisecond) // probes at 0, 1 s, 2 s: healthy
		runner.set("c1 check", false)
		time.Sleep(2 * time.Second) // failures at 3 s, 4 s: below the threshold
		synctest.Wait()
		if got := get(m.Liveness(), "c1"); got != kubecontainer.ProbeSuccess || len(rec.all()) != 2 {
			t.Fatalf("after 2 failures: %v, events %v; want success and an Unhealthy per failure", got, rec.all())
		}
		time.Sleep(time.Second) // the third failure
		synctest.Wait()
		if got := get(m.Liveness(), "c1"); got != kubecontainer.ProbeFailure {
			t.Fatalf("after 3 failures: %v, want failure", got)
		}
		if ch := m.TakeChanged(); ch["u1"] != (Change{Sync: true}) {
			t.Fatalf("changes %v, want a sync of u1", ch)
		}
		evs := rec.all()
		if len(evs) != 3 {
			t.Fatalf("%d events, want an Unhealthy per failed probe: %+v", len(evs), evs)
		}
		for i, ev := range evs {
			if ev.Type != schemas.EventUnhealthy || ev.Probe != schemas.ProbeLiveness || ev.Container != "app" || ev.SandboxID != "sb" ||
				ev.ID != "c1.Liveness."+strconv.FormatInt(ev.Time.UnixNano(), 10)+".Unhealthy" || ev.Message != "Liveness probe failed: c1 check is unwell" ||
				i > 0 && !ev.Time.After(evs[i-1].Time) {
				t.Fatalf("event %d: %+v", i, ev)
			}
		}
		// On hold: no more probes of this instance, whatever happens.
		n := len(runner.probed("c1 check"))
		time.Sleep(10 * time.Second)
		if got := len(runner.probed("c1 check")); got != n {
			t.Fatalf("probed %d times after the failure, want 0", got-n)
		}
		// The sync restarted it: a new instance, probed afresh; the old
		// instance's result is gone.
		runner.set("c2 check", true)
		m.UpdatePod(testPod(corev1.Container{Name: "app", LivenessProbe: execProbe("check", 1, 3)}), running("app", "c2"))
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if _, ok := m.Liveness().Get("c1"); ok {
			t.Fatal("the old instance still has a result")
		}
		if got := len(runner.probed("c2 check")); got != 2 {
			t.Fatalf("the new instance was probed %d times in 1.5 s, want 2", got)
		}
	})
}

// A handler that cannot run (kubelet's "probe errored") is an Unhealthy event
// of its own, and its result is thrown away: it neither counts towards the
// failure threshold nor breaks a run of failures.
func TestAProbeThatErrorsIsReportedAndNotCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, runner, rec := harness(t)
		runner.breakWith("c1 check", errors.New("exec: container c1 is gone"))
		m.UpdatePod(testPod(corev1.Container{Name: "app", LivenessProbe: execProbe("check", 1, 3)}), running("app", "c1"))
		time.Sleep(4500 * time.Millisecond) // five runs that error, threshold three
		synctest.Wait()
		if got := get(m.Liveness(), "c1"); got != kubecontainer.ProbeSuccess {
			t.Fatalf("after five errors: liveness %v, want success (errors are thrown away)", got)
		}
		if ch := m.TakeChanged(); len(ch) != 0 {
			t.Fatalf("changes %v after errors only, want none", ch)
		}
		evs := rec.all()
		if len(evs) != 5 {
			t.Fatalf("%d events, want an Unhealthy per run that errored: %+v", len(evs), evs)
		}
		for i, ev := range evs {
			if ev.Type != schemas.EventUnhealthy || ev.Probe != schemas.ProbeLiveness || ev.Message != "Liveness probe errored: exec: container c1 is gone" {
				t.Fatalf("event %d: %+v", i, ev)
			}
		}
		// fail, fail, error, error, fail: the third failure in a row.
		runner.breakWith("c1 check", nil)
		time.Sleep(2 * time.Second)
		runner.breakWith("c1 check", errors.New("exec: deadline"))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := get(m.Liveness(), "c1"); got != kubecontainer.ProbeSuccess {
			t.Fatalf("after two failures and two errors: liveness %v, want success", got)
		}
		runner.breakWith("c1 check", nil)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := get(m.Liveness(), "c1"); got != kubecontainer.ProbeFailure {
			t.Fatalf("after a third failure between errors: liveness %v, want failure", got)
		}
		var failed, errored int
		for _, ev := range rec.all()[5:] {
			switch {
			case strings.HasPrefix(ev.Message, "Liveness probe failed: "):
				failed++
			case strings.HasPrefix(ev.Message, "Liveness probe errored: "):
				errored++
			}
		}
		if failed != 3 || errored != 2 {
			t.Fatalf("%d failed and %d errored events, want 3 and 2: %+v", failed, errored, rec.all()[5:])
		}
	})
}

func TestReadinessFlipsAndEventsPerFailedProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, runner, rec := harness(t)
		c := corev1.Container{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
				PeriodSeconds: 2, SuccessThreshold: 2, FailureThreshold: 1,
			}}
		target := "http://10.0.0.5:8080/ready"
		runner.set(target, true)
		m.UpdatePod(testPod(c), running("app", "c1"))
		synctest.Wait()
		if got := get(m.Readiness(), "c1"); got != kubecontainer.ProbeFailure {
			t.Fatalf("initial readiness %v, want failure (not ready until probed)", got)
		}
		time.Sleep(time.Second) // one success, threshold two
		synctest.Wait()
		if got := get(m.Readiness(), "c1"); got != kubecontainer.ProbeFailure {
			t.Fatalf("after one success %v", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := get(m.Readiness(), "c1"); got != kubecontainer.ProbeSuccess {
			t.Fatalf("after two successes %v", got)
		}
		if ch := m.TakeChanged(); ch["u1"] != (Change{Status: true}) {
			t.Fatalf("changes %v, want a status of u1", ch)
		}
		runner.set(target, false)
		time.Sleep(10 * time.Second) // five failed periods: one transition
		synctest.Wait()
		if got := get(m.Readiness(), "c1"); got != kubecontainer.ProbeFailure {
			t.Fatalf("after failures %v", got)
		}
		runner.set(target, true)
		time.Sleep(4 * time.Second)
		runner.set(target, false)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if evs := rec.all(); len(evs) != 6 {
			t.Fatalf("%d events, want one per failed probe (five, then one): %+v", len(evs), evs)
		}
		if ch := m.TakeChanged(); ch["u1"] != (Change{Status: true}) {
			t.Fatalf("changes %v: a readiness change asks for a status, never a sync", ch)
		}
	})
}

func TestStartupGatesLivenessAndReadiness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, runner, _ := harness(t)
		c := corev1.Container{Name: "app",
			StartupProbe:   execProbe("started", 1, 30),
			LivenessProbe:  execProbe("alive", 1, 1),
			ReadinessProbe: execProbe("ready", 1, 1),
		}
		runner.set("c1 alive", false) // would kill at once if it ran
		runner.set("c1 ready", true)
		m.UpdatePod(testPod(c), running("app", "c1"))
		time.Sleep(5500 * time.Millisecond)
		synctest.Wait()
		if n, r := len(runner.probed("c1 alive")), len(runner.probed("c1 ready")); n != 0 || r != 0 {
			t.Fatalf("liveness probed %d, readiness %d times before the start", n, r)
		}
		if _, ok := m.Startup().Get("c1"); !ok || get(m.Startup(), "c1") != kubecontainer.ProbeUnknown {
			t.Fatalf("startup %v, want unknown", get(m.Startup(), "c1"))
		}
		runner.set("c1 alive", true)
		runner.set("c1 started", true)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := get(m.Startup(), "c1"); got != kubecontainer.ProbeSuccess {
			t.Fatalf("startup %v", got)
		}
		started := len(runner.probed("c1 started"))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if len(runner.probed("c1 started")) != started {
			t.Fatal("the startup probe runs on after it succeeded")
		}
		if len(runner.probed("c1 alive")) == 0 || get(m.Readiness(), "c1") != kubecontainer.ProbeSuccess {
			t.Fatalf("after the start: liveness probed %d times, readiness %v", len(runner.probed("c1 alive")), get(m.Readiness(), "c1"))
		}
	})
}

func TestStartupFailureAsksForASync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _, rec := harness(t)
		m.UpdatePod(testPod(corev1.Container{Name: "app", StartupProbe: execProbe("started", 1, 2)}), running("app", "c1"))
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := get(m.Startup(), "c1"); got != kubecontainer.ProbeFailure {
			t.Fatalf("startup %v, want failure", got)
		}
		if ch := m.TakeChanged(); ch["u1"] != (Change{Sync: true, Status: true}) {
			t.Fatalf("changes %v", ch)
		}
		if evs := rec.all(); len(evs) != 2 || evs[0].Probe != schemas.ProbeStartup {
			t.Fatalf("events %+v", evs)
		}
	})
}

func TestInitialDelayFromTheInstanceStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, runner, _ := harness(t)
		p := execProbe("alive", 10, 3)
		p.InitialDelaySeconds = 5
		st := running("app", "c1")
		st.ContainerStatuses[0].StartedAt = time.Now().Add(-2 * time.Second) // started before the prober learnt of it
		m.UpdatePod(testPod(corev1.Container{Name: "app", LivenessProbe: p}), st)
		time.Sleep(25 * time.Second)
		synctest.Wait()
		got := runner.probed("c1 alive")
		want := []time.Duration{3 * time.Second, 13 * time.Second, 23 * time.Second}
		if len(got) != len(want) {
			t.Fatalf("probed at %v", got)
		}
		for i := range want {
			if d := got[i].Sub(st.ContainerStatuses[0].StartedAt.Add(2 * time.Second)); d != want[i] {
				t.Fatalf("probe %d at +%v, want +%v", i, d, want[i])
			}
		}
	})
}

func TestJitterAfterARestartOfJetlet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runner := newFakeRunner()
		m := newProber(t, runner, &recorder{}, Config{Node: "n1"})
		defer m.Stop()
		start := time.Now()
		m.UpdatePod(testPod(corev1.Container{Name: "app", LivenessProbe: execProbe("alive", 10, 3)}), running("app", "c1"))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		got := runner.probed("c1 alive")
		if len(got) != 1 || got[0].Sub(start) >= 10*time.Second {
			t.Fatalf("probed at %v, want once within the first period", got)
		}
	})
}

func TestWorkersFollowTheInstances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, runner, _ := harness(t)
		c := corev1.Container{Name: "app", LivenessProbe: execProbe("alive", 1, 3), ReadinessProbe: execProbe("ready", 1, 3)}
		sidecar := corev1.Container{Name: "side", RestartPolicy: new(corev1.ContainerRestartPolicyAlways), ReadinessProbe: execProbe("ready", 1, 3)}
		initC := corev1.Container{Name: "init", ReadinessProbe: execProbe("ready", 1, 3)} // never probed
		pod := testPod(c)
		pod.Spec.InitContainers = []corev1.Container{initC, sidecar}
		st := running("app", "c1")
		st.ContainerStatuses = append(st.ContainerStatuses,
			&kubecontainer.ContainerStatus{ID: "s1", Name: "side", State: kubecontainer.ContainerRunning, StartedAt: time.Now()},
			&kubecontainer.ContainerStatus{ID: "i1", Name: "init", State: kubecontainer.ContainerRunning, StartedAt: time.Now()})
		m.UpdatePod(pod, st)
		synctest.Wait()
		if n := m.workers(); n != 3 {
			t.Fatalf("%d workers, want 3 (app liveness and readiness, sidecar readiness)", n)
		}
		m.UpdatePod(pod, st) // the same instances: the same workers
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if n := len(runner.probed("c1 alive")); n != 2 {
			t.Fatalf("liveness probed %d times in 1.5 s, want 2 (a worker was restarted)", n)
		}
		st.ContainerStatuses[0].State = kubecontainer.ContainerExited
		m.UpdatePod(pod, st)
		synctest.Wait()
		if n := m.workers(); n != 1 {
			t.Fatalf("%d workers after the app exited, want 1", n)
		}
		if _, ok := m.Liveness().Get("c1"); ok {
			t.Fatal("the exited instance still has a result")
		}
		m.RemovePod("u1")
		synctest.Wait()
		if n := m.workers(); n != 0 || m.readiness.len() != 0 || m.liveness.len() != 0 {
			t.Fatalf("after RemovePod: %d workers, %d readiness results", n, m.readiness.len())
		}
	})
}

func TestHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, runner, _ := harness(t)
		svc := "db"
		c := corev1.Container{Name: "app",
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(5432)}}, PeriodSeconds: 1},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 50051, Service: &svc}}, PeriodSeconds: 1},
		}
		runner.set("grpc 10.0.0.5:50051 db", true)
		m.UpdatePod(testPod(c), running("app", "c1"))
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if len(runner.probed("tcp 10.0.0.5:5432")) != 1 || get(m.Readiness(), "c1") != kubecontainer.ProbeSuccess {
			t.Fatalf("tcp probed %v, readiness %v", runner.probed("tcp 10.0.0.5:5432"), get(m.Readiness(), "c1"))
		}
	})
}

// A pod on a network of its own without an IP (the runtime's pod network is
// down) is not probed at an empty host, which would dial the node's own
// ports; a hostNetwork pod without one is (its ports are the node's), and
// so is an explicit host.
func TestNoProbeGoesToTheNodeForAPodWithoutIP(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, runner, _ := harness(t)
		c := corev1.Container{Name: "app",
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(5432)}}, PeriodSeconds: 1},
			LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Host: "10.9.9.9", Path: "/x", Port: intstr.FromInt32(80)}}, PeriodSeconds: 1},
		}
		runner.set("tcp :5432", true)
		st := running("app", "c1")
		st.IPs = nil
		m.UpdatePod(testPod(c), st)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if len(runner.probed("tcp :5432")) != 0 || get(m.Readiness(), "c1") == kubecontainer.ProbeSuccess {
			t.Fatalf("the pod without IP was probed at the node: %v, readiness %v", runner.probed("tcp :5432"), get(m.Readiness(), "c1"))
		}
		if len(runner.probed("http://10.9.9.9:80/x")) == 0 {
			t.Fatal("the probe with a host of its own was not run")
		}

		host := testPod(c)
		host.UID, host.Spec.HostNetwork = "u2", true
		st = running("app", "c2")
		st.UID, st.IPs = "u2", nil
		m.UpdatePod(host, st)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if get(m.Readiness(), "c2") != kubecontainer.ProbeSuccess {
			t.Fatalf("the hostNetwork pod without IP: readiness %v, probed %v", get(m.Readiness(), "c2"), runner.probed("tcp :5432"))
		}
	})
}

// A pod's probes failing for hours: the first 25 Unhealthy events pass
// (client-go's spam filter's burst), then one per 5 minutes; from the tenth
// distinct message on, each comes folded (the aggregator).
func TestUnhealthyEventsAreRateLimitedPerPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, _, rec := harness(t)
		c := corev1.Container{Name: "app", ReadinessProbe: execProbe("ready", 1, 1), LivenessProbe: execProbe("alive", 1, 1000)}
		m.UpdatePod(testPod(c), running("app", "c1"))
		time.Sleep(20 * time.Second) // two failing probes a second: 40 runs
		synctest.Wait()
		if n := len(rec.all()); n != spamBurst {
			t.Fatalf("%d events in 20 s of two failing probes, want the burst of %d", n, spamBurst)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		evs := rec.all()
		if n := len(evs) - spamBurst; n != 12 && n != 13 {
			t.Fatalf("%d more events in the next hour, want one per 5 minutes", n)
		}
		for i, ev := range evs {
			folded := strings.HasPrefix(ev.Message, aggregatePrefix)
			if folded || ev.Message != "Readiness probe failed: c1 ready is unwell" && ev.Message != "Liveness probe failed: c1 alive is unwell" {
				t.Fatalf("event %d: %q, want the probe's own message (two distinct messages are never folded)", i, ev.Message)
			}
		}
		// Another pod has its own bucket.
		other := testPod(c)
		other.UID = "u2"
		st := running("app", "c2")
		st.UID = "u2"
		m.UpdatePod(other, st)
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		if n := len(rec.all()) - len(evs); n != 2 {
			t.Fatalf("%d events of another pod's first failures, want 2", n)
		}
	})
}

func TestCorrelatorFoldsDistinctMessages(t *testing.T) {
	c, t0 := newCorrelator(), time.Unix(1e9, 0)
	for i := range aggregateMaxEvents + 2 {
		msg := "failed: " + strconv.Itoa(i)
		got, ok := c.correlate("u1", msg, t0.Add(time.Duration(i)*time.Second))
		want := msg
		if i >= aggregateMaxEvents-1 {
			want = aggregatePrefix + msg
		}
		if !ok || got != want {
			t.Fatalf("event %d: %q, %v; want %q", i, got, ok, want)
		}
	}
	// Quiet for longer than the interval: a fresh record.
	if got, _ := c.correlate("u1", "failed: again", t0.Add(time.Hour)); got != "failed: again" {
		t.Fatalf("after a quiet hour: %q", got)
	}
	c.forget("u1")
	if len(c.pods) != 0 {
		t.Fatal("forget kept the pod")
	}
}

// A pod being deleted: its liveness and startup probes stop, its readiness
// probe goes on (past the startup gate it had passed), so the container turns
// unready when it stops answering.
func TestReadinessIsProbedWhileThePodTerminates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, runner, _ := harness(t)
		c := corev1.Container{Name: "app", StartupProbe: execProbe("started", 1, 3),
			LivenessProbe: execProbe("alive", 1, 3), ReadinessProbe: execProbe("ready", 1, 1)}
		for _, target := range []string{"c1 started", "c1 alive", "c1 ready"} {
			runner.set(target, true)
		}
		m.UpdatePod(testPod(c), running("app", "c1"))
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		if get(m.Readiness(), "c1") != kubecontainer.ProbeSuccess {
			t.Fatal("not ready after its startup")
		}
		m.StopLivenessAndStartup("u1")
		synctest.Wait()
		if n := m.workers(); n != 1 {
			t.Fatalf("%d workers while the pod terminates, want its readiness worker", n)
		}
		alive := len(runner.probed("c1 alive"))
		runner.set("c1 ready", false)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if got := get(m.Readiness(), "c1"); got != kubecontainer.ProbeFailure {
			t.Fatalf("readiness %v after the container stopped answering, want failure", got)
		}
		if ch := m.TakeChanged(); ch["u1"] != (Change{Status: true}) {
			t.Fatalf("changes %v, want a status of u1", ch)
		}
		if got := len(runner.probed("c1 alive")); got != alive {
			t.Fatalf("liveness probed %d times while the pod terminates", got-alive)
		}
		m.RemovePod("u1")
		synctest.Wait()
		if n := m.workers(); n != 0 {
			t.Fatalf("%d workers after RemovePod", n)
		}
	})
}
