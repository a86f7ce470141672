package reconcile_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/embedded"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/testimages"
)

// offsetClock is the wall clock plus an offset the test advances: runtime
// times (finishedAt) are wall-clock times, so back-off is measured against
// them.
type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *offsetClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// Reset brings the clock back to the wall clock, so that the next advances
// count from a runtime time just observed.
func (c *offsetClock) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = 0
}

// recorder is an Emitter keeping every event.
type recorder struct {
	mu     sync.Mutex
	events []schemas.LifecycleEvent
}

func (r *recorder) Emit(_ context.Context, ev schemas.LifecycleEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) ofType(typ schemas.EventType) []schemas.LifecycleEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []schemas.LifecycleEvent
	for _, ev := range r.events {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// env is a process runtime on a unix socket, a CRI client, and a Kuberuntime.
type env struct {
	t   *testing.T
	dir string
	// shared is where the test and the containers of a pod given to
	// withShared exchange files: a container's /tmp and root are its own.
	shared string
	sock   string
	// bridge and cidr are the runtime's pod network, the env's own.
	bridge, cidr string
	rt           *embedded.Runtime
	client       *runtime.Client
	mgr          *reconcile.Kuberuntime
	clock        *offsetClock
	events       *recorder
	// swap is the managers' swap configuration (none by default).
	swap reconcile.MemorySwap
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir, err := os.MkdirTemp("", "jr") // short: the socket path is limited
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, shared: filepath.Join(dir, "shared"), sock: filepath.Join(dir, "cri.sock"), clock: &offsetClock{}}
	if err := os.Mkdir(e.shared, 0o777); err != nil {
		t.Fatal(err)
	}
	e.startRuntime()
	e.newManager()
	t.Cleanup(func() {
		e.cleanup()
		_ = os.RemoveAll(dir)
	})
	return e
}

func (e *env) startRuntime() {
	e.t.Helper()
	if e.bridge == "" {
		e.bridge, e.cidr = cnitest.Bridge(e.t)
	}
	rt, err := embedded.New(embedded.Config{Dir: filepath.Join(e.dir, "proc"), ShimPath: gobuild.Shim.Path(e.t), ImageMirror: testimages.ServeLibrary(e.t),
		PodBridge: e.bridge, PodCIDR: e.cidr})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := rt.Start(context.Background(), e.sock); err != nil {
		e.t.Fatal(err)
	}
	client, err := runtime.New(runtime.Config{Endpoint: "unix://" + e.sock})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := client.Connect(ctx(e.t)); err != nil {
		e.t.Fatal(err)
	}
	e.rt, e.client = rt, client
}

func (e *env) stopRuntime() {
	_ = e.client.Close()
	e.rt.Stop()
}

// newManager replaces the manager, as a restarted jetlet would.
func (e *env) newManager() {
	e.t.Helper()
	e.events = &recorder{}
	mgr, err := reconcile.New(e.client, e.events, reconcile.Config{
		NodeName: "n1",
		DataDir:  filepath.Join(e.dir, "data"),
		Clock:    e.clock,
		Swap:     e.swap,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.mgr = mgr
}

// cleanup removes every container and sandbox, which kills their processes.
func (e *env) cleanup() {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cs, err := e.client.ListContainers(c, nil); err == nil {
		for _, ct := range cs {
			_ = e.client.RemoveContainer(c, ct.GetId())
		}
	}
	if ss, err := e.client.ListPodSandbox(c, nil); err == nil {
		for _, s := range ss {
			_ = e.client.RemovePodSandbox(c, s.GetId())
		}
	}
	e.stopRuntime()
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func (e *env) status(pod *corev1.Pod) *kubecontainer.PodStatus {
	e.t.Helper()
	s, err := e.mgr.GetPodStatus(ctx(e.t), string(pod.UID), pod.Name, pod.Namespace)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) sync(pod *corev1.Pod) kubecontainer.PodSyncResult {
	e.t.Helper()
	return e.mgr.SyncPod(ctx(e.t), pod, e.status(pod))
}

// waitFor polls the pod's status until cond holds, or fails at the deadline.
func (e *env) waitFor(pod *corev1.Pod, what string, cond func(*kubecontainer.PodStatus) bool) *kubecontainer.PodStatus {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := e.status(pod)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s; status: %s", what, describe(s))
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

func describe(s *kubecontainer.PodStatus) string {
	var b strings.Builder
	for _, sb := range s.SandboxStatuses {
		b.WriteString("sandbox " + sb.Id[:8] + " " + sb.State.String() + "; ")
	}
	for _, c := range s.ContainerStatuses {
		b.WriteString(c.Name + "/" + c.ID[:8] + " " + c.State.String() + "; ")
	}
	return b.String()
}

func newestState(name string, state kubecontainer.ContainerState) func(*kubecontainer.PodStatus) bool {
	return func(s *kubecontainer.PodStatus) bool {
		c := s.FindContainerStatusByName(name)
		return c != nil && c.State == state
	}
}

func makePod(name string, policy corev1.RestartPolicy, containers ...corev1.Container) *corev1.Pod {
	grace := int64(2)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{
			RestartPolicy:                 policy,
			Containers:                    containers,
			TerminationGracePeriodSeconds: &grace,
		},
	}
}

// withShared mounts e.shared as a hostPath volume at the same path in every
// container of pod, and returns pod.
func (e *env) withShared(pod *corev1.Pod) *corev1.Pod {
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "shared",
		VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: e.shared}}})
	mount := corev1.VolumeMount{Name: "shared", MountPath: e.shared}
	for i := range pod.Spec.InitContainers {
		pod.Spec.InitContainers[i].VolumeMounts = append(pod.Spec.InitContainers[i].VolumeMounts, mount)
	}
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].VolumeMounts = append(pod.Spec.Containers[i].VolumeMounts, mount)
	}
	return pod
}

func shell(name, script string) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox:1.36", Command: []string{"sh", "-c", script}}
}

func actionsOf(r kubecontainer.PodSyncResult, action string) []schemas.ActionResult {
	var out []schemas.ActionResult
	for _, a := range r.ActionResults() {
		if a.Action == action {
			out = append(out, a)
		}
	}
	return out
}

func mustSucceed(t *testing.T, r kubecontainer.PodSyncResult) {
	t.Helper()
	if err := r.Error(); err != nil {
		t.Fatalf("sync failed: %v\nactions: %+v", err, r.Actions)
	}
}

func TestSyncPodStartsNewPod(t *testing.T) {
	e := newEnv(t)
	out := filepath.Join(e.shared, "out.txt")
	c := shell("app", `echo "$GREETING" $(WHO) $POD_NAME $POD_NS $NODE $POD_IP > $(OUT); exec sleep 1000`)
	c.Env = []corev1.EnvVar{
		{Name: "OUT", Value: out},
		{Name: "WHO", Value: "world"},
		{Name: "GREETING", Value: "hello-$(WHO)-$$(WHO)"},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
	}
	pod := e.withShared(makePod("web", corev1.RestartPolicyAlways, c))

	r := e.sync(pod)
	mustSucceed(t, r)
	for _, want := range []string{schemas.ActionCreatePodSandbox, schemas.ActionPullImage, schemas.ActionStartContainer} {
		if len(actionsOf(r, want)) != 1 {
			t.Errorf("want one %s action, got %+v", want, r.Actions)
		}
	}
	s := e.waitFor(pod, "app running", newestState("app", kubecontainer.ContainerRunning))
	api := e.mgr.ToAPIStatus(pod, s)
	if api.Phase != schemas.PhaseRunning || !api.Containers[0].Ready || api.Sandbox == nil || api.Sandbox.State != schemas.SandboxReady {
		t.Errorf("status = %+v", api)
	}
	deadline := time.Now().Add(30 * time.Second)
	var got []byte
	for time.Now().Before(deadline) {
		if got, _ = os.ReadFile(out); len(got) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// status.podIP: the pod's address on the runtime's pod network.
	var podIP string
	if api.Sandbox != nil && len(api.Sandbox.IPs) == 1 && strings.HasPrefix(api.Sandbox.IPs[0], strings.TrimSuffix(e.cidr, "0/24")) {
		podIP = api.Sandbox.IPs[0]
	} else {
		t.Errorf("sandbox %+v: want one IP in %s", api.Sandbox, e.cidr)
	}
	if want := "hello-world-$(WHO) world web default n1 " + podIP + "\n"; string(got) != want {
		t.Errorf("container wrote %q, want %q", got, want)
	}
	logFile := filepath.Join(e.dir, "data", "logs", "default_web_uid-web", "app", "0.log")
	if _, err := os.Stat(logFile); err != nil {
		t.Errorf("container log: %v", err)
	}
	for _, typ := range []schemas.EventType{schemas.EventSandboxCreated, schemas.EventImagePulled, schemas.EventContainerCreated, schemas.EventContainerStarted} {
		if evs := e.events.ofType(typ); len(evs) != 1 {
			t.Errorf("want one %s event, got %d", typ, len(evs))
		}
	}
	started := e.events.ofType(schemas.EventContainerStarted)[0]
	if started.ID != s.ContainerStatuses[0].ID+".ContainerStarted" || started.Node != "n1" || started.UID != "uid-web" || started.SandboxID != s.SandboxStatuses[0].Id {
		t.Errorf("ContainerStarted event = %+v", started)
	}

	// Converged: a second sync does nothing.
	if r := e.sync(pod); len(r.Actions) != 0 {
		t.Errorf("sync of a converged pod: %+v", r.Actions)
	}
}

func TestCrashingContainerBacksOff(t *testing.T) {
	e := newEnv(t)
	pod := makePod("crash", corev1.RestartPolicyAlways, shell("app", "exit 1"))

	mustSucceed(t, e.sync(pod))
	exitedWithCount := func(n int) func(*kubecontainer.PodStatus) bool {
		return func(s *kubecontainer.PodStatus) bool {
			c := s.FindContainerStatusByName("app")
			return c != nil && c.State == kubecontainer.ContainerExited && c.RestartCount == n
		}
	}
	e.waitFor(pod, "first exit", exitedWithCount(0))

	// The first restart is immediate (the back-off starts at this crash).
	r := e.sync(pod)
	mustSucceed(t, r)
	e.waitFor(pod, "second exit", exitedWithCount(1))

	// Then 10 s, 20 s, 40 s: measured from the last exit, on the test's clock.
	for i, delay := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second} {
		e.clock.Reset() // the container just exited: count from its finishedAt
		r := e.sync(pod)
		starts := actionsOf(r, schemas.ActionStartContainer)
		if len(starts) != 1 || starts[0].Error != "CrashLoopBackOff" || !strings.Contains(starts[0].Message, "back-off "+delay.String()) {
			t.Fatalf("crash %d: want CrashLoopBackOff with back-off %s, got %+v", i+2, delay, r.Actions)
		}
		api := e.mgr.ToAPIStatus(pod, e.status(pod))
		if c := api.Containers[0]; c.State != schemas.ContainerWaiting || c.Reason != "CrashLoopBackOff" || c.ExitCode != 1 {
			t.Errorf("status while backing off = %+v", c)
		}
		if api.Phase != schemas.PhaseRunning {
			t.Errorf("phase while backing off = %s, want Running", api.Phase)
		}
		// Half way: still backing off.
		e.clock.Advance(delay / 2)
		if r := e.sync(pod); actionsOf(r, schemas.ActionStartContainer)[0].Error != "CrashLoopBackOff" {
			t.Fatalf("restarted before the back-off of %s passed: %+v", delay, r.Actions)
		}
		e.clock.Advance(delay / 2)
		r = e.sync(pod)
		mustSucceed(t, r)
		e.waitFor(pod, "next exit", exitedWithCount(i+2))
	}
	backOffs := e.events.ofType(schemas.EventBackOff)
	ids := map[string]bool{}
	for _, ev := range backOffs {
		ids[ev.ID] = true
	}
	if len(ids) != 3 {
		t.Errorf("want BackOff events for 3 distinct crashes, got ids %v", ids)
	}
}

func TestOnFailureExitZeroIsNotRestarted(t *testing.T) {
	e := newEnv(t)
	pod := makePod("job", corev1.RestartPolicyOnFailure, shell("app", "exit 0"))
	mustSucceed(t, e.sync(pod))
	s := e.waitFor(pod, "exit", newestState("app", kubecontainer.ContainerExited))
	first := s.ContainerStatuses[0].ID

	r := e.sync(pod)
	mustSucceed(t, r)
	if len(actionsOf(r, schemas.ActionStartContainer)) != 0 {
		t.Fatalf("restarted a container that succeeded under OnFailure: %+v", r.Actions)
	}
	s = e.status(pod)
	if len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].ID != first {
		t.Errorf("want the one exited instance, got %s", describe(s))
	}
	if s.SandboxStatuses[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("the sandbox of a finished pod should be stopped: %s", describe(s))
	}
	if phase := e.mgr.ToAPIStatus(pod, s).Phase; phase != schemas.PhaseSucceeded {
		t.Errorf("phase = %s, want Succeeded", phase)
	}
	// And no new sandbox for a pod that is done.
	if r := e.sync(pod); len(actionsOf(r, schemas.ActionCreatePodSandbox)) != 0 {
		t.Errorf("a done pod got a new sandbox: %+v", r.Actions)
	}
}

func TestInitContainersRunInOrder(t *testing.T) {
	e := newEnv(t)
	out := filepath.Join(e.shared, "order.txt")
	pod := makePod("init", corev1.RestartPolicyAlways, shell("app", "echo app >> "+out+"; exec sleep 1000"))
	pod.Spec.InitContainers = []corev1.Container{
		shell("init1", "echo init1 >> "+out),
		shell("init2", "echo init2 >> "+out),
	}
	e.withShared(pod)
	var started []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		s := e.status(pod)
		if c := s.FindContainerStatusByName("app"); c != nil && c.State == kubecontainer.ContainerRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("app never ran; started %v; status %s", started, describe(s))
		}
		for _, c := range s.ContainerStatuses {
			if c.Init && c.State == kubecontainer.ContainerRunning && len(started) > 0 && started[len(started)-1] != c.Name {
				t.Fatalf("init container %s runs while %s was started", c.Name, started[len(started)-1])
			}
		}
		r := e.mgr.SyncPod(ctx(t), pod, s)
		mustSucceed(t, r)
		var thisSync []string
		for _, a := range r.Actions {
			if a.Action == schemas.ActionInitContainer || a.Action == schemas.ActionStartContainer {
				thisSync = append(thisSync, a.Target)
			}
		}
		if len(thisSync) > 1 {
			t.Fatalf("one sync started %v; init containers start one at a time", thisSync)
		}
		started = append(started, thisSync...)
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if want := []string{"init1", "init2", "app"}; !slices.Equal(started, want) {
		t.Errorf("started %v, want %v", started, want)
	}
	got, _ := os.ReadFile(out)
	if string(got) != "init1\ninit2\napp\n" {
		t.Errorf("order file = %q", got)
	}
	api := e.mgr.ToAPIStatus(pod, e.status(pod))
	if api.Phase != schemas.PhaseRunning || api.InitContainers[0].State != schemas.ContainerExited || api.InitContainers[1].Reason != "Completed" {
		t.Errorf("status = %+v", api)
	}
}

func TestSpecChangeRestartsOnlyThatContainer(t *testing.T) {
	e := newEnv(t)
	pod := makePod("two", corev1.RestartPolicyNever, shell("a", "exec sleep 1000"), shell("b", "exec sleep 1000"))
	mustSucceed(t, e.sync(pod))
	s := e.waitFor(pod, "both running", func(s *kubecontainer.PodStatus) bool {
		return newestState("a", kubecontainer.ContainerRunning)(s) && newestState("b", kubecontainer.ContainerRunning)(s)
	})
	a0, b0 := s.FindContainerStatusByName("a").ID, s.FindContainerStatusByName("b").ID

	pod.Spec.Containers[1].Env = []corev1.EnvVar{{Name: "VERSION", Value: "2"}}
	r := e.sync(pod)
	mustSucceed(t, r)
	kills := actionsOf(r, schemas.ActionKillContainer)
	if len(kills) != 1 || kills[0].Target != "b" {
		t.Fatalf("want b killed, got %+v", r.Actions)
	}
	s = e.waitFor(pod, "new b running", func(s *kubecontainer.PodStatus) bool {
		b := s.FindContainerStatusByName("b")
		return b.ID != b0 && b.State == kubecontainer.ContainerRunning
	})
	if a := s.FindContainerStatusByName("a"); a.ID != a0 || a.State != kubecontainer.ContainerRunning {
		t.Errorf("a was touched: %s", describe(s))
	}
	if b := s.FindContainerStatusByName("b"); b.RestartCount != 1 || b.Hash != reconcile.HashContainer(&pod.Spec.Containers[1]) {
		t.Errorf("new b: restartCount %d, hash %s", b.RestartCount, b.Hash)
	}
	killed := e.events.ofType(schemas.EventContainerKilled)
	if len(killed) != 1 || killed[0].Reason != schemas.ReasonSpecChanged || killed[0].ContainerID != b0 || killed[0].ID != b0+".ContainerKilled" {
		t.Errorf("ContainerKilled events = %+v", killed)
	}
	if r := e.sync(pod); len(r.Actions) != 0 {
		t.Errorf("not converged after the change: %+v", r.Actions)
	}
}

func TestKillPodEscalatesAfterGracePeriod(t *testing.T) {
	e := newEnv(t)
	ready := filepath.Join(e.shared, "trapped")
	pod := e.withShared(makePod("stubborn", corev1.RestartPolicyAlways, shell("app", `trap "" TERM; touch `+ready+`; while true; do sleep 1; done`)))
	mustSucceed(t, e.sync(pod))
	e.waitFor(pod, "running", newestState("app", kubecontainer.ContainerRunning))
	// SIGTERM must find the trap set.
	deadline := time.Now().Add(30 * time.Second)
	for _, err := os.Stat(ready); err != nil; _, err = os.Stat(ready) {
		if time.Now().After(deadline) {
			t.Fatal("the container never set its trap")
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}

	r := e.mgr.KillPod(ctx(t), pod, nil, nil)
	mustSucceed(t, r)
	s := e.status(pod)
	c := s.FindContainerStatusByName("app")
	if c.State != kubecontainer.ContainerExited || c.ExitCode != 128+9 {
		t.Errorf("want the container SIGKILLed (exit 137) after the grace period, got %s exit %d", c.State, c.ExitCode)
	}
	if s.SandboxStatuses[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("sandbox not stopped: %s", describe(s))
	}
	killed := e.events.ofType(schemas.EventContainerKilled)
	if len(killed) != 1 || killed[0].Reason != schemas.ReasonPodDeleted {
		t.Errorf("ContainerKilled events = %+v", killed)
	}
	if len(e.events.ofType(schemas.EventSandboxStopped)) != 1 {
		t.Errorf("want one SandboxStopped event")
	}
	died, ok := kubecontainer.ContainerDiedEvent("n1", s, c)
	if !ok || died.ID != c.ID+".ContainerDied" || *died.ExitCode != 137 || died.Reason != schemas.ReasonError {
		t.Errorf("ContainerDied = %+v", died)
	}

	// Gone: garbage collection removes the sandbox, the containers and the dirs.
	if err := e.mgr.GarbageCollect(ctx(t), kubecontainer.PodStateFunc(func(string) bool { return true })); err != nil {
		t.Fatal(err)
	}
	if s := e.status(pod); len(s.SandboxStatuses)+len(s.ContainerStatuses) != 0 {
		t.Errorf("after GC: %s", describe(s))
	}
	if _, err := os.Stat(filepath.Join(e.dir, "data", "logs", "default_stubborn_uid-stubborn")); !os.IsNotExist(err) {
		t.Errorf("pod log dir not removed: %v", err)
	}
}

func TestRestartCountsSurviveRestart(t *testing.T) {
	e := newEnv(t)
	pod := makePod("keep", corev1.RestartPolicyAlways, shell("app", "exec sleep 1000"), shell("crash", "exit 3"))
	mustSucceed(t, e.sync(pod))
	e.waitFor(pod, "crash exited", newestState("crash", kubecontainer.ContainerExited))
	mustSucceed(t, e.sync(pod)) // first restart: immediate
	s := e.waitFor(pod, "crash exited again", func(s *kubecontainer.PodStatus) bool {
		c := s.FindContainerStatusByName("crash")
		return c.RestartCount == 1 && c.State == kubecontainer.ContainerExited
	})
	app := s.FindContainerStatusByName("app").ID

	// jetlet and the runtime restart: the new manager reads everything back.
	e.stopRuntime()
	e.startRuntime()
	e.newManager()
	s = e.status(pod)
	api := e.mgr.ToAPIStatus(pod, s)
	if api.Containers[1].RestartCount != 1 || api.Containers[1].ExitCode != 3 {
		t.Errorf("after restart: %+v", api.Containers[1])
	}
	r := e.sync(pod)
	mustSucceed(t, r)
	if kills := actionsOf(r, schemas.ActionKillContainer); len(kills) != 0 {
		t.Errorf("a restarted jetlet killed %+v", kills)
	}
	s = e.waitFor(pod, "crash restarted", func(s *kubecontainer.PodStatus) bool {
		return s.FindContainerStatusByName("crash").RestartCount == 2
	})
	if got := s.FindContainerStatusByName("app"); got.ID != app || got.State != kubecontainer.ContainerRunning {
		t.Errorf("app was restarted: %s", describe(s))
	}
}
