package reconcile

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
)

// hookRunner is a HandlerRunner whose exec handlers answer with ok and say
// whether the container was running when they ran (pure logic: the real
// runner is runtime/probe's).
type hookRunner struct {
	rt *fakecri.Runtime
	ok bool

	mu sync.Mutex
	// ran: one line per exec, "<cmd[0]> running=<bool>".
	ran []string
}

func (h *hookRunner) Exec(ctx context.Context, id string, cmd []string, _ time.Duration) (kubecontainer.HandlerOutcome, error) {
	resp, err := h.rt.ContainerStatus(ctx, id, false)
	running := err == nil && resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ran = append(h.ran, cmd[0]+" running="+map[bool]string{true: "true", false: "false"}[running])
	if h.ok {
		return kubecontainer.HandlerOutcome{OK: true}, nil
	}
	return kubecontainer.HandlerOutcome{Message: "hook said no"}, nil
}

func (h *hookRunner) HTTPGet(_ context.Context, u *url.URL, _ http.Header, _ time.Duration) (kubecontainer.HandlerOutcome, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ran = append(h.ran, "GET "+u.String())
	if h.ok {
		return kubecontainer.HandlerOutcome{OK: true}, nil
	}
	return kubecontainer.HandlerOutcome{Message: "HTTP probe failed with statuscode: 500"}, nil
}

func (h *hookRunner) TCPSocket(context.Context, string, time.Duration) (kubecontainer.HandlerOutcome, error) {
	panic("not used")
}

func (h *hookRunner) GRPC(context.Context, string, string, time.Duration) (kubecontainer.HandlerOutcome, error) {
	panic("not used")
}

func (h *hookRunner) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ran...)
}

// stopRecorder records the timeout of every StopContainer.
type stopRecorder struct {
	*fakecri.Runtime
	mu       sync.Mutex
	timeouts []int64
	ids      []string // in the order stopped
}

func (r *stopRecorder) StopContainer(ctx context.Context, id string, timeout int64) error {
	r.mu.Lock()
	r.timeouts = append(r.timeouts, timeout)
	r.ids = append(r.ids, id)
	r.mu.Unlock()
	return r.Runtime.StopContainer(ctx, id, timeout)
}

func newHookManager(t *testing.T, rt Runtime, runner kubecontainer.HandlerRunner) (*Kuberuntime, *eventLog) {
	t.Helper()
	events := &eventLog{}
	m, err := New(rt, events, Config{NodeName: "n1", DataDir: t.TempDir(), Handlers: runner})
	if err != nil {
		t.Fatal(err)
	}
	return m, events
}

func execHook(cmd string) *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{cmd}}}
}

// A failing postStart hook: FailedPostStartHook with the handler's message,
// the instance killed (reason FailedPostStartHook), the start failed with
// PostStartHookError; the next sync restarts it with back-off.
func TestPostStartHookFailureKillsTheContainer(t *testing.T) {
	rt := fakecri.New()
	runner := &hookRunner{rt: rt}
	m, events := newHookManager(t, rt, runner)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Lifecycle: &corev1.Lifecycle{PostStart: execHook("post")}})

	res := syncOnce(t, m, pod)
	sr := startResult(res)
	if sr.Error != kubecontainer.ErrPostStartHook.Error() {
		t.Fatalf("start result %+v, want error %s", sr, kubecontainer.ErrPostStartHook)
	}
	failed := events.of(schemas.EventFailedPostStartHook)
	if len(failed) != 1 || failed[0].Container != "app" || !strings.Contains(failed[0].Message, "hook said no") {
		t.Fatalf("FailedPostStartHook events %+v", failed)
	}
	killed := events.of(schemas.EventContainerKilled)
	if len(killed) != 1 || killed[0].Reason != schemas.ReasonFailedPostStartHook || killed[0].ContainerID != failed[0].ContainerID {
		t.Fatalf("ContainerKilled events %+v", killed)
	}
	st, err := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if err != nil {
		t.Fatal(err)
	}
	if cs := st.FindContainerStatusByName("app"); cs == nil || cs.State != kubecontainer.ContainerExited {
		t.Fatalf("container %+v, want exited", cs)
	}
	api := m.ToAPIStatus(pod, st)
	if c := api.Containers[0]; c.State != schemas.ContainerWaiting || c.Reason != kubecontainer.ErrPostStartHook.Error() {
		t.Fatalf("api status %+v, want waiting with %s", c, kubecontainer.ErrPostStartHook)
	}
	// The next sync restarts it at once (the first restart has no delay)...
	runner.ok = true
	if sr := startResult(syncOnce(t, m, pod)); sr.Error != "" || sr.Action == "" {
		t.Fatalf("restart %+v", sr)
	}
}

// preStop runs before the stop signal, inside the grace period: the
// container still runs when the hook does; a failing hook is an event and
// the kill goes on.
func TestPreStopHookRunsBeforeTheStop(t *testing.T) {
	rt := fakecri.New()
	runner := &hookRunner{rt: rt}
	m, events := newHookManager(t, rt, runner)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Lifecycle: &corev1.Lifecycle{PreStop: execHook("pre")}})
	if err := syncOnce(t, m, pod).Error(); err != nil {
		t.Fatal(err)
	}
	res := m.KillPod(context.Background(), pod, nil, nil)
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	if got := runner.calls(); len(got) != 1 || got[0] != "pre running=true" {
		t.Fatalf("hooks ran %v, want pre once while running", got)
	}
	failed := events.of(schemas.EventFailedPreStopHook)
	if len(failed) != 1 || !strings.Contains(failed[0].Message, "hook said no") {
		t.Fatalf("FailedPreStopHook events %+v", failed)
	}
	if n := events.count(schemas.EventContainerKilled); n != 1 {
		t.Fatalf("%d ContainerKilled, want 1: the kill goes on", n)
	}
}

// A kill without the spec (an orphan) runs the preStop hook recorded on the
// instance.
func TestPreStopHookOfAnOrphanFromItsAnnotation(t *testing.T) {
	rt := fakecri.New()
	runner := &hookRunner{rt: rt, ok: true}
	m, _ := newHookManager(t, rt, runner)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Lifecycle: &corev1.Lifecycle{PreStop: execHook("pre")}})
	if err := syncOnce(t, m, pod).Error(); err != nil {
		t.Fatal(err)
	}
	meta := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid1"}}
	st, err := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.KillOrphan(context.Background(), meta, st, nil).Error(); err != nil {
		t.Fatal(err)
	}
	if got := runner.calls(); len(got) != 1 || got[0] != "pre running=true" {
		t.Fatalf("hooks ran %v, want pre once while running", got)
	}
}

// A sleep preStop longer than the grace period is cut at the grace period,
// and the stop gets what is left, at least 2 s.
func TestPreStopSleepIsBoundedByTheGracePeriod(t *testing.T) {
	for _, tc := range []struct {
		name         string
		sleep, grace int64
		wantStop     int64
	}{
		{"sleep shorter than grace", 3, 10, 7},
		{"sleep longer than grace", 60, 10, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := &stopRecorder{Runtime: fakecri.New()}
				m, _ := newHookManager(t, rt, nil)
				pod := testPod(corev1.Container{Name: "app", Image: "img:1", Lifecycle: &corev1.Lifecycle{
					PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: tc.sleep}},
				}})
				pod.Spec.TerminationGracePeriodSeconds = &tc.grace
				if err := syncOnce(t, m, pod).Error(); err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				if err := m.KillPod(context.Background(), pod, nil, nil).Error(); err != nil {
					t.Fatal(err)
				}
				if waited, want := time.Since(start), time.Duration(min(tc.sleep, tc.grace))*time.Second; waited != want {
					t.Errorf("preStop took %s, want %s", waited, want)
				}
				if len(rt.timeouts) != 1 || rt.timeouts[0] != tc.wantStop {
					t.Fatalf("stop timeouts %v, want [%d]", rt.timeouts, tc.wantStop)
				}
			})
		})
	}
}

// lifecycle.stopSignal reaches the CRI config; a name the CRI does not know
// fails the container's config rather than being dropped.
func TestStopSignalInContainerConfig(t *testing.T) {
	m, _ := newTestManager(t, fakecri.New())
	sig := func(s corev1.Signal) *corev1.Pod {
		return testPod(corev1.Container{Name: "app", Image: "img:1", Lifecycle: &corev1.Lifecycle{StopSignal: &s}})
	}
	for _, tc := range []struct {
		signal corev1.Signal
		want   runtimeapi.Signal
	}{
		{"SIGUSR1", runtimeapi.Signal_SIGNAL_SIGUSR1},
		{"SIGRTMIN+1", runtimeapi.Signal_SIGNAL_SIGRTMINPLUS1},
	} {
		pod := sig(tc.signal)
		cfg, err := m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "", podNetwork{}, false)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.StopSignal != tc.want {
			t.Errorf("%s: stop signal %s, want %s", tc.signal, cfg.StopSignal, tc.want)
		}
	}
	pod := sig("SIGNOPE")
	if _, err := m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "", podNetwork{}, false); err == nil || !strings.Contains(err.Error(), "lifecycle.stopSignal") {
		t.Fatalf("err %v, want one naming lifecycle.stopSignal", err)
	}
}

// An httpGet hook goes to the pod's IP and the named port of the container.
func TestHTTPGetHookGoesToThePodIPAndNamedPort(t *testing.T) {
	rt := fakecri.New()
	runner := &hookRunner{rt: rt}
	m, events := newHookManager(t, rt, runner)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1",
		Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 9000}},
		Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/quit?now=1", Port: intstr.FromString("admin"), Scheme: corev1.URISchemeHTTP,
		}}}})
	if err := syncOnce(t, m, pod).Error(); err != nil {
		t.Fatal(err)
	}
	st, err := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.IPs) == 0 {
		t.Fatal("the fake sandbox has no IP")
	}
	if err := m.KillPod(context.Background(), pod, st, nil).Error(); err != nil {
		t.Fatal(err)
	}
	want := "GET http://" + st.IPs[0] + ":9000/quit?now=1"
	if got := runner.calls(); len(got) != 1 || got[0] != want {
		t.Fatalf("hooks ran %v, want [%s]", got, want)
	}
	failed := events.of(schemas.EventFailedPreStopHook)
	if len(failed) != 1 || !strings.Contains(failed[0].Message, "statuscode: 500") {
		t.Fatalf("FailedPreStopHook %+v", failed)
	}
}

// An httpGet postStart goes to the pod's IP and the named port once the
// container runs; its failure is the handler's message in
// FailedPostStartHook, and the start fails.
func TestPostStartHTTPGetHook(t *testing.T) {
	rt := fakecri.New()
	runner := &hookRunner{rt: rt}
	m, events := newHookManager(t, rt, runner)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1",
		Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 9000}},
		Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: "/warm", Port: intstr.FromString("admin"),
		}}}})
	if sr := startResult(syncOnce(t, m, pod)); sr.Error != kubecontainer.ErrPostStartHook.Error() {
		t.Fatalf("start result %+v, want error %s", sr, kubecontainer.ErrPostStartHook)
	}
	st, err := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if err != nil {
		t.Fatal(err)
	}
	if got := runner.calls(); len(got) != 1 || got[0] != "GET http://"+st.IPs[0]+":9000/warm" {
		t.Fatalf("hooks ran %v, want one GET to the pod's IP and port 9000", got)
	}
	if failed := events.of(schemas.EventFailedPostStartHook); len(failed) != 1 || !strings.Contains(failed[0].Message, "statuscode: 500") {
		t.Fatalf("FailedPostStartHook %+v", failed)
	}
}

// A sleep postStart holds the start's result for its seconds, as kubelet's
// startContainer waits for its postStart handler.
func TestPostStartSleepHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := fakecri.New()
		m, events := newHookManager(t, rt, nil)
		pod := testPod(corev1.Container{Name: "app", Image: "img:1", Lifecycle: &corev1.Lifecycle{
			PostStart: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 3}},
		}})
		start := time.Now()
		if sr := startResult(syncOnce(t, m, pod)); sr.Error != "" {
			t.Fatalf("start result %+v", sr)
		}
		if took := time.Since(start); took != 3*time.Second {
			t.Errorf("the start took %s, want the hook's 3s", took)
		}
		if started := events.of(schemas.EventContainerStarted); len(started) != 1 {
			t.Errorf("ContainerStarted events %+v, want one", started)
		}
	})
}
