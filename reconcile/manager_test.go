package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime/crilabels"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
	"github.com/jetlet/jetlet/test/leftovers"
)

type eventLog struct {
	mu     sync.Mutex
	events []schemas.LifecycleEvent
}

func (l *eventLog) Emit(_ context.Context, ev schemas.LifecycleEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *eventLog) count(typ schemas.EventType) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, ev := range l.events {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func (l *eventLog) of(typ schemas.EventType) []schemas.LifecycleEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []schemas.LifecycleEvent
	for _, ev := range l.events {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func newTestManager(t testing.TB, rt Runtime) (*Kuberuntime, *eventLog) {
	t.Helper()
	events := &eventLog{}
	dir := t.TempDir()
	m, err := New(rt, events, Config{NodeName: "n1", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { leftovers.Unmount(t, dir) })
	return m, events
}

func testPod(containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid1"},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, Containers: containers},
	}
}

func syncOnce(t *testing.T, m *Kuberuntime, pod *corev1.Pod) kubecontainer.PodSyncResult {
	t.Helper()
	ctx := context.Background()
	st, err := m.GetPodStatus(ctx, string(pod.UID), pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return m.SyncPod(ctx, pod, st)
}

func startResult(r kubecontainer.PodSyncResult) schemas.ActionResult {
	for _, a := range r.ActionResults() {
		if a.Action == schemas.ActionStartContainer {
			return a
		}
	}
	return schemas.ActionResult{}
}

// The restart back-off doubles from 10 s to 300 s, measured from the last
// exit, and starts again from 10 s after 10 minutes without a crash; each
// figure is pinned, the reset on both sides of its boundary.
func TestRestartBackOffTimeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := fakecri.New()
		m, events := newTestManager(t, rt)
		pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"false"}})
		if err := syncOnce(t, m, pod).Error(); err != nil {
			t.Fatal(err)
		}
		// The first instance runs a while: no two instances share a creation
		// time (which tells the newest).
		time.Sleep(time.Second)
		// crash: exit, then sync until the restart happens; return the wait.
		crash := func() time.Duration {
			rt.Exit("app", 1)
			start := time.Now()
			for {
				r := syncOnce(t, m, pod)
				sr := startResult(r)
				if sr.Error == "" && sr.Action != "" {
					return time.Since(start)
				}
				if sr.Error != kubecontainer.ErrCrashLoopBackOff.Error() {
					t.Fatalf("unexpected result %+v", r.Actions)
				}
				time.Sleep(time.Second)
			}
		}
		var waits []time.Duration
		for range 8 {
			waits = append(waits, crash())
		}
		want := []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
		for i := range want {
			if waits[i] != want[i] {
				t.Fatalf("waits = %v, want %v", waits, want)
			}
		}
		// Each sync of a back-off period says BackOff again, with the
		// period's id: seven periods (every wait but the first), seven ids.
		ids := map[string]bool{}
		for _, ev := range events.of(schemas.EventBackOff) {
			if !strings.HasPrefix(ev.ID, ev.ContainerID+".") || !strings.HasSuffix(ev.ID, ".BackOff") {
				t.Errorf("BackOff id %s, want <exited container id>.<restart count>.BackOff", ev.ID)
			}
			ids[ev.ID] = true
		}
		if len(ids) != 7 {
			t.Errorf("%d BackOff ids, want one per back-off period, 7", len(ids))
		}
		// The reset counts from the last restart (the back-off's last update):
		// a crash 9m59s after it still waits the capped delay...
		time.Sleep(10*time.Minute - time.Second)
		if w := crash(); w != 300*time.Second {
			t.Errorf("a crash 9m59s after the last restart waited %s, want 300s (no reset yet)", w)
		}
		// ...and one 10m01s after it starts over: at once, then 10 s.
		time.Sleep(10*time.Minute + time.Second)
		if w := crash(); w != 0 {
			t.Errorf("a crash 10m01s after the last restart waited %s, want 0 (back-off reset)", w)
		}
		if w := crash(); w != 10*time.Second {
			t.Errorf("then waited %s, want 10s", w)
		}
	})
}

func TestBackoffUnit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBackoff(RealClock, time.Second, 4*time.Second, 0)
		t0 := time.Now()
		if b.IsInBackOffSince("k", t0) {
			t.Fatal("in back-off without a failure")
		}
		b.Next("k", t0)
		if !b.IsInBackOffSince("k", t0) || b.Get("k") != time.Second {
			t.Fatalf("after one failure: delay %s", b.Get("k"))
		}
		time.Sleep(time.Second)
		if b.IsInBackOffSince("k", t0) {
			t.Fatal("still in back-off after the delay")
		}
		for range 5 {
			b.Next("k", time.Now())
		}
		if b.Get("k") != 4*time.Second {
			t.Fatalf("delay %s, want the 4s cap", b.Get("k"))
		}
		time.Sleep(9 * time.Second) // > 2*max
		b.GC()
		if b.Get("k") != 0 {
			t.Fatal("GC kept a stale entry")
		}
	})
}

// An image pull failure backs off per pod and image; the result and the
// status say ErrImagePull then ImagePullBackOff.
type failingPuller struct {
	*fakecri.Runtime
	fail bool
}

func (f *failingPuller) PullImage(ctx context.Context, im *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	if f.fail {
		return "", errors.New("registry says no")
	}
	return f.Runtime.PullImage(ctx, im, auth, sc)
}

func TestImagePullBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &failingPuller{Runtime: fakecri.New(), fail: true}
		m, events := newTestManager(t, rt)
		pod := testPod(corev1.Container{Name: "app", Image: "img", Command: []string{"x"}}) // :latest: Always
		if got := startResult(syncOnce(t, m, pod)).Error; got != "ErrImagePull" {
			t.Fatalf("first: %s", got)
		}
		if got := startResult(syncOnce(t, m, pod)).Error; got != "ImagePullBackOff" {
			t.Fatalf("second: %s", got)
		}
		st, _ := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
		if c := m.ToAPIStatus(pod, st).Containers[0]; c.State != schemas.ContainerWaiting || c.Reason != "ImagePullBackOff" {
			t.Errorf("status %+v", c)
		}
		time.Sleep(10 * time.Second)
		rt.fail = false
		if r := syncOnce(t, m, pod); r.Error() != nil {
			t.Fatalf("after the back-off: %v", r.Error())
		}
		if events.count(schemas.EventImagePullFailed) != 1 || events.count(schemas.EventImagePulled) != 1 {
			t.Errorf("events: %+v", events.events)
		}
		// Never: absent image is an error, nothing pulled.
		pod2 := testPod(corev1.Container{Name: "app", Image: "other:1", ImagePullPolicy: corev1.PullNever, Command: []string{"x"}})
		pod2.UID = "uid2"
		if got := startResult(syncOnce(t, m, pod2)).Error; got != "ErrImageNeverPull" {
			t.Errorf("Never: %s", got)
		}
	})
}

func TestGarbageCollectKeepsNewestDeadInstance(t *testing.T) {
	rt := fakecri.New()
	m, _ := newTestManager(t, rt)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}})
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	syncOnce(t, m, pod)
	// Make three dead instances by spec changes of a container that exits.
	for i := range 3 {
		pod.Spec.Containers[0].Args = []string{strings.Repeat("a", i+1)}
		syncOnce(t, m, pod)
		time.Sleep(time.Millisecond) // distinct creation times
	}
	rt.Exit("app", 1)
	st, _ := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if len(st.ContainerStatuses) != 4 {
		t.Fatalf("want 4 instances, got %d", len(st.ContainerStatuses))
	}
	newest := st.ContainerStatuses[0]
	if err := m.GarbageCollect(context.Background(), kubecontainer.PodStateFunc(func(string) bool { return false })); err != nil {
		t.Fatal(err)
	}
	st, _ = m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if len(st.ContainerStatuses) != 1 || st.ContainerStatuses[0].ID != newest.ID || st.ContainerStatuses[0].RestartCount != 3 {
		t.Fatalf("after GC: %+v", st.ContainerStatuses)
	}
	if len(st.SandboxStatuses) != 1 {
		t.Fatalf("the pod's only sandbox went")
	}
	// The pod is gone: everything goes.
	m.KillPod(context.Background(), pod, nil, nil)
	if err := m.GarbageCollect(context.Background(), kubecontainer.PodStateFunc(func(string) bool { return true })); err != nil {
		t.Fatal(err)
	}
	st, _ = m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if len(st.ContainerStatuses)+len(st.SandboxStatuses) != 0 {
		t.Fatalf("after GC of a gone pod: %+v", st)
	}
}

// A collection of one pod removes that pod's content and leaves another
// gone pod's for a collection of the node.
func TestGarbageCollectPodTakesThatPodOnly(t *testing.T) {
	rt := fakecri.New()
	m, _ := newTestManager(t, rt)
	pods := make([]*corev1.Pod, 2)
	for i := range pods {
		pods[i] = testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}})
		pods[i].UID = types.UID(fmt.Sprintf("uid%d", i+1))
		syncOnce(t, m, pods[i])
		m.KillPod(context.Background(), pods[i], nil, nil)
	}
	gone := kubecontainer.PodStateFunc(func(string) bool { return true })
	if err := m.GarbageCollectPod(context.Background(), "uid1", gone); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{0, 2} { // uid2: its container and sandbox
		st, _ := m.GetPodStatus(context.Background(), string(pods[i].UID), "p", "ns")
		if got := len(st.ContainerStatuses) + len(st.SandboxStatuses); got != want {
			t.Errorf("pod %s after a collection of uid1: %d objects left, want %d", pods[i].UID, got, want)
		}
	}
}

func TestContainerConfig(t *testing.T) {
	m, _ := newTestManager(t, fakecri.New())
	grace := int64(45)
	pod := testPod(corev1.Container{
		Name: "app", Image: "img:1", Command: []string{"run", "$(A)"}, Args: []string{"--x=$(B)", "$$(A)", "$(NOPE)"},
		WorkingDir: "/w",
		Env:        []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "$(A)-2"}, {Name: "UID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.uid"}}}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		},
		VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
		Ports:        []corev1.ContainerPort{{ContainerPort: 8080}},
	})
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	cfg, err := m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 3, "sha256:x", podNetwork{podIP: "10.0.0.1"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Command, " ") != "run 1" || strings.Join(cfg.Args, " ") != "--x=1-2 $(A) $(NOPE)" {
		t.Errorf("command %q args %q", cfg.Command, cfg.Args)
	}
	if e := cfg.Envs[2]; e.Key != "UID" || string(e.Value) != "uid1" {
		t.Errorf("envs %v", cfg.Envs)
	}
	r := cfg.Linux.Resources
	if r.CpuShares != 256 || r.CpuQuota != 50000 || r.CpuPeriod != 100000 || r.MemoryLimitInBytes != 64<<20 {
		t.Errorf("resources %+v", r)
	}
	if cfg.LogPath != "app/3.log" || cfg.Metadata.Attempt != 3 {
		t.Errorf("log path %s attempt %d", cfg.LogPath, cfg.Metadata.Attempt)
	}
	for k, want := range map[string]string{
		crilabels.AnnotationContainerRestartCount: "3", crilabels.AnnotationPodTerminationGracePeriod: "45",
		crilabels.AnnotationContainerHash: HashContainer(&pod.Spec.Containers[0]), crilabels.AnnotationContainerPorts: `[{"containerPort":8080}]`,
	} {
		if cfg.Annotations[k] != want {
			t.Errorf("annotation %s = %q, want %q", k, cfg.Annotations[k], want)
		}
	}
	if cfg.Labels[crilabels.LabelPodUID] != "uid1" || cfg.Labels[crilabels.LabelContainerName] != "app" {
		t.Errorf("labels %v", cfg.Labels)
	}
	if len(cfg.Mounts) != 1 || cfg.Mounts[0].HostPath != m.emptyDirPath("uid1", "scratch") {
		t.Errorf("mounts %+v", cfg.Mounts)
	}
	priv := true
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &priv}
	if _, err := m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "", podNetwork{}, false); err == nil {
		t.Error("privileged container accepted without AllowPrivileged")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{
		{NodeName: "Bad_Name", DataDir: "/d"},
		{NodeName: "n1", DataDir: "relative"},
		{NodeName: "n1", DataDir: "/d", LogDir: "relative"},
		{NodeName: "n1", DataDir: "/d", BackOffInitial: time.Minute, BackOffMax: time.Second},
		{NodeName: "n1", DataDir: "/d", BackOffInitial: -time.Second},
		{NodeName: "n1", DataDir: "/d", BackOffReset: -time.Second},
		{NodeName: "n1", DataDir: "/d", ImageBackOffInitial: time.Minute, ImageBackOffMax: time.Second},
		{NodeName: "n1", DataDir: "/d", GC: GCPolicy{MinAge: -time.Second}},
	} {
		if _, err := New(fakecri.New(), &eventLog{}, c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: err %v", c, err)
		}
	}
	valid := Config{NodeName: "n1", DataDir: "/d"}
	if _, err := New(nil, &eventLog{}, valid); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil Runtime: err %v", err)
	}
	if _, err := New(fakecri.New(), nil, valid); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil Emitter: err %v", err)
	}
}

func TestPodPhase(t *testing.T) {
	running := apiContainer{found: true, ContainerStatus: schemas.ContainerStatus{State: schemas.ContainerRunning}}
	exited := func(code int32) apiContainer {
		return apiContainer{found: true, ContainerStatus: schemas.ContainerStatus{State: schemas.ContainerExited, ExitCode: code}}
	}
	none := apiContainer{ContainerStatus: schemas.ContainerStatus{State: schemas.ContainerWaiting}}
	crashLooping := apiContainer{found: true, lastTerminated: true, lastExitCode: 1, ContainerStatus: schemas.ContainerStatus{State: schemas.ContainerWaiting}}
	started := apiContainer{found: true, ContainerStatus: schemas.ContainerStatus{State: schemas.ContainerRunning, Started: true}}
	crashLooping42 := crashLooping
	crashLooping42.lastExitCode = 42
	policy := func(p corev1.ContainerRestartPolicy) corev1.Container { return corev1.Container{RestartPolicy: &p} }
	restartOn42 := policy(corev1.ContainerRestartPolicyNever)
	restartOn42.RestartPolicyRules = restartRule(corev1.ContainerRestartRuleOnExitCodesOpIn, 42)
	for _, tc := range []struct {
		name   string
		policy corev1.RestartPolicy
		inits  []apiContainer
		apps   []apiContainer
		want   schemas.PodPhase
		// sidecars: the init containers are sidecars.
		sidecars bool
		// app and init are the spec of every app and init container.
		app, init corev1.Container
	}{
		{"nothing started", corev1.RestartPolicyAlways, nil, []apiContainer{none}, schemas.PhasePending, false, corev1.Container{}, corev1.Container{}},
		{"running", corev1.RestartPolicyAlways, nil, []apiContainer{running}, schemas.PhaseRunning, false, corev1.Container{}, corev1.Container{}},
		{"one of two not started", corev1.RestartPolicyAlways, nil, []apiContainer{running, none}, schemas.PhasePending, false, corev1.Container{}, corev1.Container{}},
		{"all exited under Always", corev1.RestartPolicyAlways, nil, []apiContainer{exited(0)}, schemas.PhaseRunning, false, corev1.Container{}, corev1.Container{}},
		{"crash looping", corev1.RestartPolicyAlways, nil, []apiContainer{crashLooping}, schemas.PhaseRunning, false, corev1.Container{}, corev1.Container{}},
		{"all succeeded under Never", corev1.RestartPolicyNever, nil, []apiContainer{exited(0), exited(0)}, schemas.PhaseSucceeded, false, corev1.Container{}, corev1.Container{}},
		{"one failed under Never", corev1.RestartPolicyNever, nil, []apiContainer{exited(0), exited(2)}, schemas.PhaseFailed, false, corev1.Container{}, corev1.Container{}},
		{"one failed under OnFailure", corev1.RestartPolicyOnFailure, nil, []apiContainer{exited(2)}, schemas.PhaseRunning, false, corev1.Container{}, corev1.Container{}},
		{"all succeeded under OnFailure", corev1.RestartPolicyOnFailure, nil, []apiContainer{exited(0)}, schemas.PhaseSucceeded, false, corev1.Container{}, corev1.Container{}},
		{"init running", corev1.RestartPolicyAlways, []apiContainer{running}, []apiContainer{none}, schemas.PhasePending, false, corev1.Container{}, corev1.Container{}},
		{"init failed under Never", corev1.RestartPolicyNever, []apiContainer{exited(1)}, []apiContainer{none}, schemas.PhaseFailed, false, corev1.Container{}, corev1.Container{}},
		{"init failed under Always", corev1.RestartPolicyAlways, []apiContainer{exited(1)}, []apiContainer{none}, schemas.PhasePending, false, corev1.Container{}, corev1.Container{}},
		{"init done, app running", corev1.RestartPolicyAlways, []apiContainer{exited(0)}, []apiContainer{running}, schemas.PhaseRunning, false, corev1.Container{}, corev1.Container{}},
		{"sidecar running, not started", corev1.RestartPolicyAlways, []apiContainer{running}, []apiContainer{none}, schemas.PhasePending, true, corev1.Container{}, corev1.Container{}},
		{"sidecar started, app not yet", corev1.RestartPolicyAlways, []apiContainer{started}, []apiContainer{none}, schemas.PhasePending, true, corev1.Container{}, corev1.Container{}},
		{"sidecar and app running", corev1.RestartPolicyNever, []apiContainer{started}, []apiContainer{running}, schemas.PhaseRunning, true, corev1.Container{}, corev1.Container{}},
		{"app succeeded under Never, sidecar still running", corev1.RestartPolicyNever, []apiContainer{started}, []apiContainer{exited(0)}, schemas.PhaseRunning, true, corev1.Container{}, corev1.Container{}},
		{"app succeeded under Never, sidecar killed", corev1.RestartPolicyNever, []apiContainer{exited(137)}, []apiContainer{exited(0)}, schemas.PhaseSucceeded, true, corev1.Container{}, corev1.Container{}},
		{"app failed under Never, sidecar killed", corev1.RestartPolicyNever, []apiContainer{exited(137)}, []apiContainer{exited(1)}, schemas.PhaseFailed, true, corev1.Container{}, corev1.Container{}},
		{"sidecar crash looping, app running", corev1.RestartPolicyAlways, []apiContainer{crashLooping}, []apiContainer{running}, schemas.PhaseRunning, true, corev1.Container{}, corev1.Container{}},
		// Container restart policies and rules (KEP-5307).
		{"rule restarts exit 42 under Never", corev1.RestartPolicyNever, nil, []apiContainer{exited(0), exited(42)}, schemas.PhaseRunning, false, restartOn42, corev1.Container{}},
		{"rule restarts the crash-looping one under Never", corev1.RestartPolicyNever, nil, []apiContainer{exited(0), crashLooping42}, schemas.PhaseRunning, false, restartOn42, corev1.Container{}},
		{"rule not matched under Never", corev1.RestartPolicyNever, nil, []apiContainer{exited(0), exited(1)}, schemas.PhaseFailed, false, restartOn42, corev1.Container{}},
		{"policy Never under Always, one failed", corev1.RestartPolicyAlways, nil, []apiContainer{exited(0), exited(1)}, schemas.PhaseFailed, false, policy(corev1.ContainerRestartPolicyNever), corev1.Container{}},
		{"policy Never under Always, all succeeded", corev1.RestartPolicyAlways, nil, []apiContainer{exited(0)}, schemas.PhaseSucceeded, false, policy(corev1.ContainerRestartPolicyNever), corev1.Container{}},
		{"policy Never under Always, one running", corev1.RestartPolicyAlways, nil, []apiContainer{exited(1), running}, schemas.PhaseRunning, false, policy(corev1.ContainerRestartPolicyNever), corev1.Container{}},
		{"policy OnFailure under Never, one failed", corev1.RestartPolicyNever, nil, []apiContainer{exited(0), exited(1)}, schemas.PhaseRunning, false, policy(corev1.ContainerRestartPolicyOnFailure), corev1.Container{}},
		{"init with policy Never failed under Always", corev1.RestartPolicyAlways, []apiContainer{exited(1)}, []apiContainer{none}, schemas.PhaseFailed, false, corev1.Container{}, policy(corev1.ContainerRestartPolicyNever)},
		{"init with policy OnFailure failed under Never", corev1.RestartPolicyNever, []apiContainer{exited(1)}, []apiContainer{none}, schemas.PhasePending, false, corev1.Container{}, policy(corev1.ContainerRestartPolicyOnFailure)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: tc.policy}}
			for range tc.apps {
				pod.Spec.Containers = append(pod.Spec.Containers, tc.app)
			}
			for range tc.inits {
				c := tc.init
				if tc.sidecars {
					always := corev1.ContainerRestartPolicyAlways
					c.RestartPolicy = &always
				}
				pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
			}
			if got := podPhase(pod, tc.inits, tc.apps); got != tc.want {
				t.Errorf("phase %s, want %s", got, tc.want)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "EMPTY": ""}
	mapping := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for in, want := range map[string]string{
		"$(A)": "1", "x$(A)y": "x1y", "$$(A)": "$(A)", "$(B)": "$(B)", "$(A": "$(A", "$": "$", "a$b": "a$b",
		"$(EMPTY)x": "x", "$$$(A)": "$1", "$()": "$()",
	} {
		if got := expand(in, mapping); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPullPolicyDefault(t *testing.T) {
	for image, want := range map[string]corev1.PullPolicy{
		"busybox": corev1.PullAlways, "busybox:latest": corev1.PullAlways, "busybox:1.36": corev1.PullIfNotPresent,
		"reg:5000/busybox": corev1.PullAlways, "reg:5000/busybox:1": corev1.PullIfNotPresent,
		"busybox@sha256:abc": corev1.PullIfNotPresent, "busybox:latest@sha256:abc": corev1.PullAlways,
	} {
		if got := pullPolicy(&corev1.Container{Image: image}); got != want {
			t.Errorf("%s: %s, want %s", image, got, want)
		}
	}
}

// vanishingSandbox lists a newest sandbox that is gone by the time its
// status is asked for.
type vanishingSandbox struct{ *fakecri.Runtime }

func (v vanishingSandbox) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	out, err := v.Runtime.ListPodSandbox(ctx, f)
	return append(out, &runtimeapi.PodSandbox{Id: "gone", State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: time.Now().Add(time.Hour).UnixNano()}), err
}

// TestPodIPsWhenNewestSandboxVanished: the IPs are those of the newest
// sandbox that could be read, not none.
func TestPodIPsWhenNewestSandboxVanished(t *testing.T) {
	ctx := context.Background()
	rt := fakecri.New()
	m, _ := newTestManager(t, vanishingSandbox{rt})
	pod := testPod(corev1.Container{Name: "a", Image: "img:1", Command: []string{"x"}})
	if err := m.SyncPod(ctx, pod, nil).Error(); err != nil {
		t.Fatal(err)
	}
	st, err := m.GetPodStatus(ctx, "uid1", "p", "ns")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.SandboxStatuses) != 1 || len(st.IPs) != 1 || st.IPs[0] != "10.0.0.1" {
		t.Errorf("sandboxes %d, IPs %v; want 1 and [10.0.0.1]", len(st.SandboxStatuses), st.IPs)
	}
}

// flushingLog is an Emitter whose events are stored only when flushed, or
// never when failing.
type flushingLog struct {
	eventLog
	failing bool
	stored  map[string]bool // event ids
}

func (l *flushingLog) Flush(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failing {
		return errors.New("NATS away")
	}
	for _, ev := range l.events {
		l.stored[ev.ID] = true
	}
	return nil
}

// removalWitness checks, at each removal, that the removed object's facts are
// stored.
type removalWitness struct {
	Runtime
	log      *flushingLog
	problems []string
}

func (w *removalWitness) RemoveContainer(ctx context.Context, id string) error {
	w.log.mu.Lock()
	for _, typ := range []schemas.EventType{schemas.EventContainerCreated, schemas.EventContainerStarted, schemas.EventContainerDied} {
		if !w.log.stored[kubecontainer.EventID(id, typ)] {
			w.problems = append(w.problems, "container "+id+" removed before its "+string(typ)+" was stored")
		}
	}
	w.log.mu.Unlock()
	return w.Runtime.RemoveContainer(ctx, id)
}

func (w *removalWitness) RemovePodSandbox(ctx context.Context, id string) error {
	w.log.mu.Lock()
	if !w.log.stored[kubecontainer.EventID(id, schemas.EventSandboxCreated)] {
		w.problems = append(w.problems, "sandbox "+id+" removed before its SandboxCreated was stored")
	}
	w.log.mu.Unlock()
	return w.Runtime.RemovePodSandbox(ctx, id)
}

// A container or sandbox that is removed can no longer be derived from: its
// facts are stored first, and nothing goes while they cannot be.
func TestGarbageCollectStoresTheFactsOfWhatItRemovesFirst(t *testing.T) {
	rt := fakecri.New()
	log := &flushingLog{stored: map[string]bool{}}
	w := &removalWitness{Runtime: rt, log: log}
	m, err := New(w, log, Config{NodeName: "n1", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}})
	syncOnce(t, m, pod)
	rt.Exit("app", 3)
	m.KillPod(context.Background(), pod, nil, nil)
	gone := kubecontainer.PodStateFunc(func(string) bool { return true })

	log.failing = true
	if err := m.GarbageCollect(context.Background(), gone); err == nil {
		t.Error("GC reported no error while the facts could not be stored")
	}
	st, _ := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if len(st.ContainerStatuses) != 1 || len(st.SandboxStatuses) != 1 {
		t.Fatalf("GC removed %+v while the facts could not be stored", st)
	}

	log.failing = false
	if err := m.GarbageCollect(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	st, _ = m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if len(st.ContainerStatuses)+len(st.SandboxStatuses) != 0 {
		t.Fatalf("after GC of a gone pod: %+v", st)
	}
	for _, p := range w.problems {
		t.Error(p)
	}
}

// stopRacingExit is a runtime whose StopContainer fails; with exits set, the
// container has exited by then anyway (containerd's "ttrpc: closed" when the
// task ends under the stop).
type stopRacingExit struct {
	*fakecri.Runtime
	exits bool
}

func (r *stopRacingExit) StopContainer(ctx context.Context, id string, timeout int64) error {
	if r.exits {
		_ = r.Runtime.StopContainer(ctx, id, timeout)
	}
	return errors.New("ttrpc: closed")
}

func TestAStopThatFailsBecauseTheContainerExitedKills(t *testing.T) {
	for _, exits := range []bool{true, false} {
		rt := &stopRacingExit{Runtime: fakecri.New()}
		m, _ := newTestManager(t, rt)
		pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}})
		syncOnce(t, m, pod)
		rt.exits = exits
		err := m.KillPod(context.Background(), pod, nil, nil).Error()
		if exits && err != nil {
			t.Errorf("stop failed but the container exited: %v, want the kill done", err)
		}
		if !exits && !errors.Is(err, kubecontainer.ErrKillContainer) {
			t.Errorf("stop failed and the container runs: %v, want ErrKillContainer", err)
		}
	}
}
