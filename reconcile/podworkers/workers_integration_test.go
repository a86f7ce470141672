package podworkers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/reconcile/pleg"
	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/reconcile/prober"
	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/embedded"
	"github.com/jetlet/jetlet/runtime/probe"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/testimages"
)

// sink keeps every event and status, as events.EventPublisher and status.StatusWriter store them: an
// event once per id.
type sink struct {
	mu       sync.Mutex
	events   []schemas.LifecycleEvent
	ids      map[string]bool
	statuses map[string][]*schemas.PodStatus
}

func (s *sink) Emit(_ context.Context, ev schemas.LifecycleEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ids[ev.ID] {
		s.ids[ev.ID] = true
		s.events = append(s.events, ev)
	}
}

func (s *sink) PutStatus(st *schemas.PodStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.statuses[st.UID] = append(s.statuses[st.UID], st)
}

func (s *sink) RefreshStatus(st *schemas.PodStatus) { s.PutStatus(st) }

func (s *sink) ofType(uid string, typ schemas.EventType) []schemas.LifecycleEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []schemas.LifecycleEvent
	for _, ev := range s.events {
		if ev.UID == uid && ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func (s *sink) lastStatus(uid string) *schemas.PodStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.statuses[uid]; len(st) > 0 {
		return st[len(st)-1]
	}
	return nil
}

// node is the embedded process runtime on a unix socket and the pod
// workers of one jetlet over it.
type node struct {
	t      *testing.T
	dir    string
	client *runtime.Client
	mgr    *reconcile.Kuberuntime
	sink   *sink
	w      *podworkers.Workers
	reg    *prometheus.Registry // the pod workers' metrics
	stop   func()
}

func newNode(t *testing.T) *node {
	t.Helper()
	dir, err := os.MkdirTemp("", "jpw") // short: the socket path is limited
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "cri.sock")
	bridge, cidr := cnitest.Bridge(t)
	rt, err := embedded.New(embedded.Config{Dir: filepath.Join(dir, "proc"), ShimPath: gobuild.Shim.Path(t), Logger: zerolog.Nop(), ImageMirror: testimages.ServeLibrary(t),
		PodBridge: bridge, PodCIDR: cidr})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background(), sock); err != nil {
		t.Fatal(err)
	}
	client, err := runtime.New(runtime.Config{Endpoint: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, dir: dir, client: client}
	t.Cleanup(func() {
		if n.stop != nil {
			n.stop()
		}
		removeAll(client)
		_ = client.Close()
		rt.Stop()
		_ = os.RemoveAll(dir)
	})
	return n
}

// removeAll removes every container and sandbox, which kills their processes.
func removeAll(client *runtime.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cs, err := client.ListContainers(ctx, nil); err == nil {
		for _, c := range cs {
			_ = client.RemoveContainer(ctx, c.GetId())
		}
	}
	if ss, err := client.ListPodSandbox(ctx, nil); err == nil {
		for _, s := range ss {
			_ = client.RemovePodSandbox(ctx, s.GetId())
		}
	}
}

// run starts a jetlet's pod workers on the node (stopping the previous
// one's, as a restart would) and hands them desired.
func (n *node) run(desired ...podworkers.Desired) {
	n.t.Helper()
	n.runWith((*podworkers.Workers).Start, desired)
}

// runWith is run with start handing desired over (Start or StartOffline).
func (n *node) runWith(start func(*podworkers.Workers, context.Context, []podworkers.Desired) error, desired []podworkers.Desired) {
	n.t.Helper()
	if n.stop != nil {
		n.stop()
	}
	n.sink = &sink{ids: map[string]bool{}, statuses: map[string][]*schemas.PodStatus{}}
	emit := podworkers.IntentEmitter(n.sink)
	probes, err := prober.New(probe.New(n.client, probe.Config{}), emit, prober.Config{Node: "n1"})
	if err != nil {
		n.t.Fatal(err)
	}
	mgr, err := reconcile.New(n.client, emit, reconcile.Config{NodeName: "n1", DataDir: filepath.Join(n.dir, "data"),
		Liveness: probes.Liveness(), Readiness: probes.Readiness(), Startup: probes.Startup()})
	if err != nil {
		n.t.Fatal(err)
	}
	n.reg = prometheus.NewRegistry()
	relister, err := pleg.New(mgr, n.sink, pleg.Config{Node: "n1", Period: 50 * time.Millisecond, Logger: zerolog.Nop(), Registerer: n.reg})
	if err != nil {
		n.t.Fatal(err)
	}
	w, err := podworkers.New(mgr, relister, emit, n.sink, podworkers.Config{Node: "n1", GCPeriod: time.Hour, Prober: probes,
		Logger: zerolog.Nop(), Registerer: n.reg})
	if err != nil {
		n.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { relister.Run(ctx) })
	wg.Go(func() { w.Run(ctx, 10*time.Second) })
	n.stop = func() { cancel(); wg.Wait(); probes.Stop(); n.stop = nil }
	if err := start(w, n.t.Context(), desired); err != nil {
		n.t.Fatal(err)
	}
	n.mgr, n.w = mgr, w
}

// pods returns the uids of the pods the runtime holds anything of.
func (n *node) pods() map[string]bool {
	n.t.Helper()
	pods, err := n.mgr.GetPods(n.t.Context(), true)
	if err != nil {
		n.t.Fatal(err)
	}
	uids := map[string]bool{}
	for _, p := range pods {
		uids[p.UID] = true
	}
	return uids
}

var seq uint64

func apply(uid string, policy corev1.RestartPolicy, script string) podworkers.Desired {
	return applySpec(uid, corev1.PodSpec{RestartPolicy: policy, Containers: []corev1.Container{
		{Name: "app", Image: "busybox:1.36", Command: []string{"sh", "-c", script}},
	}})
}

// applySpec is the next intent applying a pod of spec, with a grace period
// of 2 seconds.
func applySpec(uid string, spec corev1.PodSpec) podworkers.Desired {
	seq++
	grace := int64(2)
	spec.TerminationGracePeriodSeconds = &grace
	return podworkers.Desired{UID: uid, IntentSeq: seq, ReceivedAt: time.Now(), Intent: &schemas.PodIntent{
		Op: schemas.OpApply, Revision: int64(seq),
		Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)}, Spec: spec},
	}}
}

func deleteOf(uid string) podworkers.Desired {
	seq++
	return podworkers.Desired{UID: uid, IntentSeq: seq, ReceivedAt: time.Now(), Intent: &schemas.PodIntent{
		Op: schemas.OpDelete, Revision: int64(seq),
		Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)}},
	}}
}

func mustSync(t *testing.T, w *podworkers.Workers, want podworkers.Desired) podworkers.Report {
	t.Helper()
	rep := w.Sync(t.Context(), want)
	if rep.Err != nil {
		t.Fatalf("sync of %s: %v (%+v)", want.UID, rep.Err, rep.Actions)
	}
	return rep
}

func TestStartDeletesOrphansAndAdoptsThePodsItIsGiven(t *testing.T) {
	n := newNode(t)
	n.run()
	kept, orphan := apply("kept", corev1.RestartPolicyAlways, "exec sleep 600"), apply("orphan", corev1.RestartPolicyAlways, "exec sleep 600")
	mustSync(t, n.w, kept)
	mustSync(t, n.w, orphan)
	started := n.sink.ofType("kept", schemas.EventContainerStarted)

	// A restarted jetlet recovered an intent for one pod only.
	n.run(kept)
	poll.Until(t, 30*time.Second, poll.Msg("the orphan to be deleted"), func() bool { return !n.pods()["orphan"] })
	killed := n.sink.ofType("orphan", schemas.EventContainerKilled)
	if len(killed) != 1 || killed[0].Reason != schemas.ReasonOrphaned {
		t.Errorf("orphan's ContainerKilled events %+v, want one with reason Orphaned", killed)
	}
	poll.Until(t, 10*time.Second, poll.Msg("PodTerminated of the orphan"), func() bool {
		return len(n.sink.ofType("orphan", schemas.EventPodTerminated)) == 1
	})
	if term := n.sink.ofType("orphan", schemas.EventPodTerminated)[0]; term.Reason != schemas.ReasonOrphaned {
		t.Errorf("PodTerminated reason %q, message %q; want Orphaned", term.Reason, term.Message)
	}
	// The delete emits PodTerminated, then its sync stores the status.
	poll.Until(t, 10*time.Second, func() string {
		return fmt.Sprintf("orphan's last status %+v, want Terminated", n.sink.lastStatus("orphan"))
	}, func() bool {
		st := n.sink.lastStatus("orphan")
		return st != nil && st.Phase == schemas.PhaseTerminated
	})

	// The pod with an intent is adopted as it runs.
	if !n.pods()["kept"] {
		t.Fatal("the pod with an intent was deleted")
	}
	if n.sink.ofType("kept", schemas.EventContainerKilled) != nil {
		t.Error("the pod with an intent had a container killed")
	}
	poll.Until(t, 10*time.Second, poll.Msg("the kept pod's status"), func() bool {
		st := n.sink.lastStatus("kept")
		return st != nil && st.Phase == schemas.PhaseRunning && st.IntentSeq == kept.IntentSeq
	})
	if st := n.sink.lastStatus("kept"); st.Containers[0].ContainerID != started[0].ContainerID {
		t.Errorf("kept pod runs container %s, want %s adopted", st.Containers[0].ContainerID, started[0].ContainerID)
	}
}

func TestDeleteKillsReportsExitsAndForgetsThePod(t *testing.T) {
	n := newNode(t)
	n.run()
	mustSync(t, n.w, apply("web", corev1.RestartPolicyAlways, "exec sleep 600"))
	del := deleteOf("web")
	rep := mustSync(t, n.w, del)
	var kinds []string
	for _, a := range rep.Actions {
		kinds = append(kinds, a.Action)
	}
	if len(kinds) != 2 || kinds[0] != schemas.ActionKillContainer || kinds[1] != schemas.ActionKillPodSandbox {
		t.Errorf("delete actions %v, want KillContainer, KillPodSandbox", kinds)
	}
	if rep.Status == nil || rep.Status.Phase != schemas.PhaseTerminated || rep.Status.Containers[0].State != schemas.ContainerExited {
		t.Errorf("delete status %+v, want Terminated with the container Exited", rep.Status)
	}
	if n.pods()["web"] {
		t.Error("the runtime still holds the deleted pod")
	}
	killed := n.sink.ofType("web", schemas.EventContainerKilled)
	if len(killed) != 1 || killed[0].Reason != schemas.ReasonPodDeleted || killed[0].IntentSeq != del.IntentSeq {
		t.Errorf("ContainerKilled %+v, want reason PodDeleted naming intent %d", killed, del.IntentSeq)
	}
	if len(n.sink.ofType("web", schemas.EventContainerDied)) != 1 || len(n.sink.ofType("web", schemas.EventPodTerminated)) != 1 {
		t.Error("want one ContainerDied and one PodTerminated event")
	}
	// The pod is forgotten: it is not counted, and deleting it again finds
	// nothing to do.
	if c := n.w.PodCounts(); c.Total != 0 {
		t.Errorf("pod counts %+v after the delete, want none", c)
	}
	if rep := mustSync(t, n.w, deleteOf("web")); len(rep.Actions) != 0 || rep.Status != nil {
		t.Errorf("second delete: %+v, want nothing to do", rep)
	}
}

func TestAContainerThatExitsIsRestartedAndAFinishedPodIsNot(t *testing.T) {
	n := newNode(t)
	n.run()
	mustSync(t, n.w, apply("crash", corev1.RestartPolicyAlways, "exit 3"))
	mustSync(t, n.w, apply("job", corev1.RestartPolicyOnFailure, "exit 0"))
	// The relist sees the exit and wakes the pod, which kubelet restarts at
	// once after the first crash.
	poll.Until(t, 30*time.Second, poll.Msg("the crashed container restarted"), func() bool {
		st := n.sink.lastStatus("crash")
		return st != nil && st.Containers[0].RestartCount >= 1
	})
	poll.Until(t, 30*time.Second, poll.Msg("the job to succeed and its sandbox to stop"), func() bool {
		st := n.sink.lastStatus("job")
		return st != nil && st.Phase == schemas.PhaseSucceeded && (st.Sandbox == nil || st.Sandbox.State != schemas.SandboxReady)
	})
	// Synced again (as a resync would), the finished pod stays finished.
	if rep := mustSync(t, n.w, apply("job", corev1.RestartPolicyOnFailure, "exit 0")); len(rep.Actions) != 0 || rep.Status.Phase != schemas.PhaseSucceeded {
		t.Errorf("sync of a succeeded pod: %+v", rep)
	}
	if started := n.sink.ofType("job", schemas.EventContainerStarted); len(started) != 1 {
		t.Errorf("job started %d times, want once", len(started))
	}
}
