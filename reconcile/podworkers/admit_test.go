package podworkers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/jetlet/jetlet/reconcile/admission"
	"github.com/jetlet/jetlet/reconcile/pleg"
	"github.com/jetlet/jetlet/schemas"
)

// admittingWorkers are Workers over m admitting against a node of 1Gi of
// memory and maxPods pods, with the relist their syncs read running until
// the test ends; their statuses go to the log returned.
func admittingWorkers(t testing.TB, m *scriptedManager, maxPods int64) (*Workers, *statusLog) {
	t.Helper()
	relister, err := pleg.New(m, discard{}, pleg.Config{Node: "n1", Period: time.Second, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	node := admission.Node{Name: "n1", PodSecurity: admission.LevelBaseline, Allocatable: corev1.ResourceList{
		corev1.ResourceMemory: resource.MustParse("1Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(maxPods, resource.DecimalSI),
	}}
	ctx, cancel := context.WithCancel(t.Context())
	var relisting sync.WaitGroup
	relisting.Go(func() { relister.Run(ctx) })
	t.Cleanup(func() { cancel(); relisting.Wait() })
	statuses := &statusLog{}
	w, err := New(m, relister, discard{}, statuses, Config{Node: "n1", ResyncPeriod: time.Hour, GCPeriod: time.Hour,
		Admission: func() admission.Node { return node }, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return w, statuses
}

// applyOf is an apply intent (stream sequence seq) of a pod asking memory.
func applyOf(uid string, seq uint64, memory string) Desired {
	c := corev1.Container{Name: "app", Image: "busybox"}
	if memory != "" {
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}
	}
	return Desired{UID: uid, IntentSeq: seq, ReceivedAt: time.Now(), Intent: &schemas.PodIntent{Op: schemas.OpApply,
		Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: types.UID(uid)},
			Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}}}
}

// Pods racing for the node's last memory, each asking more than half of it:
// exactly one is admitted, whatever the interleaving.
func TestAdmissionRaceForTheLastMemoryHasOneWinner(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{}}
	w, _ := admittingWorkers(t, m, 110)
	if err := w.Start(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	const racers = 8
	reports := make([]Report, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() { reports[i] = w.Sync(t.Context(), applyOf(fmt.Sprintf("racer-%d", i), uint64(i+1), "600Mi")) })
	}
	wg.Wait()
	admitted := 0
	for i, rep := range reports {
		switch {
		case rep.Refused == nil:
			admitted++
		case rep.Refused.Reason != "OutOfmemory":
			t.Errorf("racer-%d refused for %s: %s", i, rep.Refused.Reason, rep.Refused.Message)
		}
	}
	if admitted != 1 {
		t.Fatalf("%d racers admitted, want 1", admitted)
	}
	if got := w.Allocated()[corev1.ResourceMemory]; got.Cmp(resource.MustParse("600Mi")) != 0 {
		t.Errorf("allocated memory %s, want 600Mi", got.String())
	}
}

// A refused pod is Failed with kubelet's reason and holds nothing; a pod
// deleted, or finished, gives its room back, and the refused UID applied
// again is admitted.
func TestARefusedPodIsAdmittedOnceThereIsRoom(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{}}
	w, statuses := admittingWorkers(t, m, 1)
	if err := w.Start(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if rep := w.Sync(t.Context(), applyOf("a", 1, "")); rep.Refused != nil || rep.Err != nil {
		t.Fatalf("a: %+v", rep)
	}
	m.mu.Lock()
	m.running["a"] = true // its sandbox, as the sync made it
	m.mu.Unlock()
	rep := w.Sync(t.Context(), applyOf("b", 2, ""))
	if rep.Refused == nil || rep.Refused.Reason != "OutOfpods" || len(rep.Actions) != 0 {
		t.Fatalf("b: %+v, want refused OutOfpods without actions", rep)
	}
	last := statuses.statuses[len(statuses.statuses)-1]
	if last.UID != "b" || last.Phase != schemas.PhaseFailed || last.Reason != "OutOfpods" || last.Message != rep.Refused.Message {
		t.Errorf("b's status %+v: want Failed, OutOfpods, the refusal's message", last)
	}
	if got := w.Allocated()[corev1.ResourcePods]; got.Value() != 1 {
		t.Errorf("allocated pods %s, want 1: a refused pod holds nothing", got.String())
	}

	del := applyOf("a", 3, "")
	del.Intent.Op = schemas.OpDelete
	if rep := w.Sync(t.Context(), del); rep.Err != nil {
		t.Fatalf("delete a: %+v", rep)
	}
	if rep := w.Sync(t.Context(), applyOf("b", 4, "")); rep.Refused != nil {
		t.Fatalf("b again, a deleted: refused %+v", rep.Refused)
	}
}

// A pod that has finished (Succeeded) holds nothing, as kubelet counts
// only the pods that are not terminal.
func TestAFinishedPodHoldsNothing(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{"done": true}, exitedAt: time.Now()}
	w, _ := admittingWorkers(t, m, 1)
	if err := w.Start(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if rep := w.Sync(t.Context(), applyOf("done", 1, "")); rep.Status.Phase != schemas.PhaseSucceeded {
		t.Fatalf("done: %+v", rep.Status)
	}
	if rep := w.Sync(t.Context(), applyOf("next", 2, "")); rep.Refused != nil {
		t.Fatalf("next, beside a finished pod: refused %+v", rep.Refused)
	}
}

// At Start, the pods the runtime runs are admitted as they are, even past
// the node's room; the recovered ones it does not run yet are admitted
// oldest intent first, and those that no longer fit are Failed.
func TestStartAdmitsRecoveredPodsInIntentOrder(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{"running": true}}
	w, statuses := admittingWorkers(t, m, 110)
	recovered := []Desired{applyOf("later", 3, "600Mi"), applyOf("running", 1, "600Mi"), applyOf("earlier", 2, "300Mi")}
	if err := w.Start(t.Context(), recovered); err != nil {
		t.Fatal(err)
	}
	if got := w.Allocated()[corev1.ResourceMemory]; got.Cmp(resource.MustParse("900Mi")) != 0 {
		t.Errorf("allocated memory %s, want 900Mi (running and earlier)", got.String())
	}
	if len(statuses.statuses) != 1 || statuses.statuses[0].UID != "later" || statuses.statuses[0].Reason != "OutOfmemory" {
		t.Fatalf("statuses stored at Start: %+v, want later's OutOfmemory", statuses.statuses)
	}
	if counts := w.PodCounts(); counts.Total != 0 {
		t.Errorf("pod counts %+v: a refused pod is not the node's", counts)
	}
}

// An evicted pod is killed with the eviction's grace and is Failed,
// Evicted, with the eviction's message, for good: it holds nothing, and
// only a new intent starts it again.
func TestAnEvictedPodIsKilledAndStaysFailed(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{"hog": true}} // its sandbox ready
	w, statuses := admittingWorkers(t, m, 110)
	if err := w.Start(t.Context(), []Desired{applyOf("hog", 1, "100Mi")}); err != nil {
		t.Fatal(err)
	}
	const message = "The node was low on resource: memory. "
	if err := w.Evict(t.Context(), "hog", 0, "Evicted", message); err != nil {
		t.Fatal(err)
	}
	if len(m.killed) != 1 || m.killed[0] != "KillEvicted hog" {
		t.Errorf("kills %v, want KillEvicted hog", m.killed)
	}
	last := statuses.statuses[len(statuses.statuses)-1]
	if last.Phase != schemas.PhaseFailed || last.Reason != "Evicted" || last.Message != message {
		t.Errorf("status %+v: want Failed, Evicted, the message", last)
	}
	if active := w.ActivePods(); len(active) != 0 {
		t.Errorf("active pods %d, want none: an evicted pod holds nothing", len(active))
	}
	if err := w.Evict(t.Context(), "nobody", 0, "Evicted", message); err == nil {
		t.Error("evicting a pod the node does not have: no error")
	}
	calls := len(m.calls)
	if rep := w.Sync(t.Context(), applyOf("hog", 2, "100Mi")); rep.Err != nil || len(m.calls) != calls+1 {
		t.Errorf("a new intent after the eviction: %+v, SyncPod calls %d → %d; want it synced", rep, calls, len(m.calls))
	}
}

// A pod ended for the node's shutdown is killed and Failed with the
// shutdown's reason and message, as an evicted one, but an intent coming
// while the node goes down does not start it again.
func TestAPodEndedForShutdownStaysEnded(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{"web": true}}
	w, statuses := admittingWorkers(t, m, 110)
	if err := w.Start(t.Context(), []Desired{applyOf("web", 1, "100Mi")}); err != nil {
		t.Fatal(err)
	}
	const message = "Pod was terminated in response to imminent node shutdown."
	if err := w.EndForShutdown(t.Context(), "web", 20, "Terminated", message); err != nil {
		t.Fatal(err)
	}
	if len(m.killed) != 1 || m.killed[0] != "KillEvicted web" {
		t.Errorf("kills %v, want KillEvicted web", m.killed)
	}
	last := statuses.statuses[len(statuses.statuses)-1]
	if last.Phase != schemas.PhaseFailed || last.Reason != "Terminated" || last.Message != message {
		t.Errorf("status %+v: want Failed, Terminated, the message", last)
	}
	calls := len(m.calls)
	rep := w.Sync(t.Context(), applyOf("web", 2, "100Mi"))
	if len(m.calls) != calls || rep.Status == nil || rep.Status.Reason != "Terminated" {
		t.Errorf("a new intent while the node goes down: %+v, SyncPod calls %d → %d; want it still ended", rep, calls, len(m.calls))
	}
}

// A pod deleted after admission refused it is Terminated, as a deleted pod
// is: its refusal does not stay in jetlet_status (and in `jetlet get pods`)
// after the delete succeeded. A delete of a pod whose deletion finished
// before stores nothing.
func TestARefusedPodDeletedIsTerminated(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{}}
	w, statuses := admittingWorkers(t, m, 0)
	if err := w.Start(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if rep := w.Sync(t.Context(), applyOf("b", 1, "")); rep.Refused == nil || rep.Refused.Reason != "OutOfpods" {
		t.Fatalf("b: %+v, want refused OutOfpods", rep)
	}
	del := applyOf("b", 2, "")
	del.Intent.Op, del.Intent.Revision = schemas.OpDelete, 2
	rep := w.Sync(t.Context(), del)
	if rep.Err != nil || len(rep.Actions) != 0 {
		t.Fatalf("delete b: %+v, want done without actions", rep)
	}
	last := statuses.statuses[len(statuses.statuses)-1]
	if last.UID != "b" || last.Phase != schemas.PhaseTerminated || last.IntentSeq != 2 || last.Revision != 2 || last.Reason != "OutOfpods" {
		t.Errorf("b's status once deleted %+v: want Terminated, of the delete, the refusal's reason", last)
	}
	stored := len(statuses.statuses)
	if rep := w.Sync(t.Context(), del); rep.Err != nil {
		t.Fatalf("delete b again: %+v", rep)
	}
	if len(statuses.statuses) != stored {
		t.Errorf("a second delete stored %+v", statuses.statuses[stored:])
	}
}

// What admission decides against is kept as pods change (Workers.held):
// after each admission, resize (taken, deferred, infeasible), pod that
// finishes, delete and refusal it is what a walk of every active pod sums.
func TestHeldIsWhatTheActivePodsSum(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{}}
	w, _ := admittingWorkers(t, m, 4)
	if err := w.Start(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		w.mu.Lock()
		defer w.mu.Unlock()
		kept, walked := w.held.Allocated(), admission.Allocated(w.activeLocked())
		same := len(kept) == len(walked)
		for name, q := range walked {
			k, ok := kept[name]
			same = same && ok && k.Cmp(q) == 0
		}
		if !same {
			t.Errorf("after %s: kept %v, a walk of the active pods %v", step, kept, walked)
		}
	}
	sync := func(step string, want Desired) Report {
		t.Helper()
		rep := w.Sync(t.Context(), want)
		if rep.Err != nil {
			t.Fatalf("%s: %+v", step, rep)
		}
		m.mu.Lock()
		m.running[want.UID] = want.Intent.Op == schemas.OpApply && rep.Refused == nil
		m.mu.Unlock()
		check(step)
		return rep
	}
	deleteOf := func(uid string, seq uint64) Desired {
		d := applyOf(uid, seq, "")
		d.Intent.Op = schemas.OpDelete
		return d
	}
	sync("a admitted", applyOf("a", 1, "200Mi"))
	sync("b admitted", applyOf("b", 2, "300Mi"))
	sync("a's no-op intent", applyOf("a", 3, "200Mi"))
	sync("a's resize taken", applyOf("a", 4, "400Mi"))
	sync("b's resize deferred", applyOf("b", 5, "700Mi"))
	sync("b's resize infeasible", applyOf("b", 6, "2Gi"))
	if rep := sync("c refused", applyOf("c", 7, "900Mi")); rep.Refused == nil {
		t.Fatalf("c admitted beside 700Mi on a 1Gi node")
	}
	sync("a deleted", deleteOf("a", 8))
	sync("c admitted", applyOf("c", 9, "100Mi"))

	m.mu.Lock()
	m.exitedAt = time.Now() // every pod's container has exited: Succeeded
	m.mu.Unlock()
	sync("c finished", applyOf("c", 10, "100Mi"))
	sync("b deleted", deleteOf("b", 11))
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.activeLocked()); n != 0 {
		t.Errorf("%d pods active at the end, want none", n)
	}
}
