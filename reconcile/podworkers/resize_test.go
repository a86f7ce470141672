package podworkers

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// eventLog keeps the events emitted.
type eventLog struct {
	mu     sync.Mutex
	events []schemas.LifecycleEvent
}

func (l *eventLog) Emit(_ context.Context, ev schemas.LifecycleEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *eventLog) types() []schemas.EventType {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []schemas.EventType
	for _, ev := range l.events {
		out = append(out, ev.Type)
	}
	return out
}

func pendingOf(st *schemas.PodStatus) *schemas.PodCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == schemas.PodResizePending {
			return &st.Conditions[i]
		}
	}
	return nil
}

// On a node of 1Gi of memory, with a pod holding 600Mi: a resize of another
// pod that fits is taken at once; one beyond the node is Infeasible; one
// beyond what the first pod leaves is Deferred, the pod synced meanwhile
// with what it was allocated, and taken once the first pod is deleted.
func TestResizeIsAdmittedDeferredOrInfeasible(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{}}
	w, _ := admittingWorkers(t, m, 110)
	events := &eventLog{}
	w.emit = events
	ctx, cancel := context.WithCancel(t.Context())
	var running sync.WaitGroup
	running.Go(func() { w.Run(ctx, time.Second) })
	t.Cleanup(func() { cancel(); running.Wait() })
	if err := w.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, d := range []Desired{applyOf("big", 1, "600Mi"), applyOf("small", 2, "200Mi")} {
		if rep := w.Sync(ctx, d); rep.Refused != nil || rep.Err != nil {
			t.Fatalf("%s: %+v", d.UID, rep)
		}
	}
	syncedMemory := func() string {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.synced["small"].Spec.Containers[0].Resources.Requests.Memory().String()
	}
	allocated := func() string { a := w.Allocated(); return a.Memory().String() }

	rep := w.Sync(ctx, applyOf("small", 3, "300Mi"))
	if pendingOf(rep.Status) != nil || syncedMemory() != "300Mi" || allocated() != "900Mi" {
		t.Fatalf("a resize that fits: pending %+v, synced %s, allocated %s; want taken, 300Mi, 900Mi", pendingOf(rep.Status), syncedMemory(), allocated())
	}

	rep = w.Sync(ctx, applyOf("small", 4, "2Gi"))
	if c := pendingOf(rep.Status); c == nil || c.Reason != "Infeasible" || c.Message != "Node didn't have enough capacity: memory, requested: 2147483648, capacity: 1073741824" {
		t.Fatalf("a resize beyond the node: pending %+v, want Infeasible with kubelet's message", c)
	}
	if syncedMemory() != "300Mi" || allocated() != "900Mi" {
		t.Errorf("an infeasible resize changed something: synced %s, allocated %s", syncedMemory(), allocated())
	}

	rep = w.Sync(ctx, applyOf("small", 5, "500Mi"))
	if c := pendingOf(rep.Status); c == nil || c.Reason != "Deferred" {
		t.Fatalf("a resize beyond what big leaves: pending %+v, want Deferred", c)
	}
	if syncedMemory() != "300Mi" {
		t.Errorf("a deferred resize was synced: %s", syncedMemory())
	}

	del := applyOf("big", 6, "")
	del.Intent.Op = schemas.OpDelete
	if rep := w.Sync(ctx, del); rep.Err != nil {
		t.Fatalf("delete big: %+v", rep)
	}
	poll.Until(t, 30*time.Second, func() string { return "the deferred resize taken: allocated " + allocated() }, func() bool {
		return allocated() == "500Mi"
	})
	poll.Until(t, 30*time.Second, func() string { return "small synced with 500Mi, not " + syncedMemory() }, func() bool {
		return syncedMemory() == "500Mi"
	})
	want := []schemas.EventType{schemas.EventResizeStarted, schemas.EventResizeInfeasible, schemas.EventResizeDeferred, schemas.EventResizeStarted}
	var got []schemas.EventType
	for _, typ := range events.types() {
		if slices.Contains(want, typ) {
			got = append(got, typ)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("resize events %v, want %v", got, want)
	}
}

// podLevelOf is applyOf's pod with no container requests and a pod-level
// memory request (KEP-2837).
func podLevelOf(uid string, seq uint64, memory string) Desired {
	d := applyOf(uid, seq, "")
	d.Intent.Pod.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}}
	return d
}

// A change of pod-level resources is a resize as the containers' (KEP-5419):
// on a node of 1Gi with a pod holding 600Mi, one beyond what it leaves is
// Deferred, the pod synced meanwhile with its allocated pod-level
// resources, and taken once the other pod is deleted; the allocation
// recorded holds the pod level.
func TestAPodLevelResizeIsDeferredThenTaken(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{}}
	store := &checkpoints{allocs: map[string]map[string]corev1.ResourceRequirements{}}
	w, _ := admittingWorkers(t, m, 110)
	w.cfg.Allocations = store
	ctx, cancel := context.WithCancel(t.Context())
	var running sync.WaitGroup
	running.Go(func() { w.Run(ctx, time.Second) })
	t.Cleanup(func() { cancel(); running.Wait() })
	if err := w.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for _, d := range []Desired{applyOf("big", 1, "600Mi"), podLevelOf("small", 2, "200Mi")} {
		if rep := w.Sync(ctx, d); rep.Refused != nil || rep.Err != nil {
			t.Fatalf("%s: %+v", d.UID, rep)
		}
	}
	syncedMemory := func() string {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.synced["small"].Spec.Resources.Requests.Memory().String()
	}
	rep := w.Sync(ctx, podLevelOf("small", 3, "500Mi"))
	if c := pendingOf(rep.Status); c == nil || c.Reason != "Deferred" {
		t.Fatalf("a pod-level resize beyond what big leaves: pending %+v, want Deferred", c)
	}
	if syncedMemory() != "200Mi" {
		t.Errorf("a deferred pod-level resize was synced: %s", syncedMemory())
	}
	del := applyOf("big", 4, "")
	del.Intent.Op = schemas.OpDelete
	if rep := w.Sync(ctx, del); rep.Err != nil {
		t.Fatalf("delete big: %+v", rep)
	}
	poll.Until(t, 30*time.Second, func() string { return "small synced with 500Mi, not " + syncedMemory() }, func() bool {
		return syncedMemory() == "500Mi"
	})
	poll.Until(t, 30*time.Second, poll.Msg("the pod level recorded in the allocation"), func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		r, ok := store.allocs["small"][kubecontainer.AllocationPodLevel]
		return ok && r.Requests.Memory().String() == "500Mi"
	})
}

// checkpoints is the allocation checkpoint of the restart test, in memory.
type checkpoints struct {
	mu     sync.Mutex
	allocs map[string]map[string]corev1.ResourceRequirements
	stores int // records written: a disk write each in jetlet
}

func (c *checkpoints) StoreAllocation(pod *corev1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stores++
	alloc := map[string]corev1.ResourceRequirements{}
	for _, ct := range pod.Spec.Containers {
		alloc[ct.Name] = ct.Resources
	}
	if pod.Spec.Resources != nil {
		alloc[kubecontainer.AllocationPodLevel] = *pod.Spec.Resources
	}
	c.allocs[string(pod.UID)] = alloc
	return nil
}

func (c *checkpoints) LoadAllocation(uid string) (map[string]corev1.ResourceRequirements, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.allocs[uid], nil
}

// A resize the node did not take stays untaken across a restart of jetlet:
// the restarted workers sync the running pod with what was allocated and
// decide the resize again (Infeasible), instead of taking the newest intent
// for the allocation.
func TestAnInfeasibleResizeStaysPendingAcrossARestart(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{}}
	store := &checkpoints{allocs: map[string]map[string]corev1.ResourceRequirements{}}
	start := func(desired ...Desired) *Workers {
		w, _ := admittingWorkers(t, m, 110)
		w.cfg.Allocations = store
		ctx, cancel := context.WithCancel(t.Context())
		var running sync.WaitGroup
		running.Go(func() { w.Run(ctx, time.Second) })
		t.Cleanup(func() { cancel(); running.Wait() })
		if err := w.Start(ctx, desired); err != nil {
			t.Fatal(err)
		}
		return w
	}
	w := start()
	if rep := w.Sync(t.Context(), applyOf("small", 1, "200Mi")); rep.Err != nil || rep.Refused != nil {
		t.Fatalf("apply: %+v", rep)
	}
	m.mu.Lock()
	m.running["small"] = true
	m.mu.Unlock()
	resize := applyOf("small", 2, "2Gi")
	if c := pendingOf(w.Sync(t.Context(), resize).Status); c == nil || c.Reason != "Infeasible" {
		t.Fatalf("a resize beyond the node: pending %+v, want Infeasible", c)
	}

	restarted := start(resize)
	rep := restarted.Sync(t.Context(), resize)
	m.mu.Lock()
	synced := m.synced["small"].Spec.Containers[0].Resources.Requests.Memory().String()
	m.mu.Unlock()
	if c := pendingOf(rep.Status); c == nil || c.Reason != "Infeasible" || synced != "200Mi" {
		t.Fatalf("after a restart: pending %+v, synced %s; want Infeasible, the allocated 200Mi", c, synced)
	}
}

// An intent that changes no resources (every no-op intent decodes to a new
// pod value) records no allocation: only the first sync and a resize the
// node takes write one.
func TestOnlyAChangedAllocationIsRecorded(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{}}
	store := &checkpoints{allocs: map[string]map[string]corev1.ResourceRequirements{}}
	w, _ := admittingWorkers(t, m, 110)
	w.cfg.Allocations = store
	if err := w.Start(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	stores := func() int {
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.stores
	}
	for seq, memory := range []string{"200Mi", "200Mi", "200Mi", "300Mi", "300Mi"} {
		if rep := w.Sync(t.Context(), applyOf("a", uint64(seq+1), memory)); rep.Err != nil || rep.Refused != nil {
			t.Fatalf("intent %d: %+v", seq+1, rep)
		}
		m.mu.Lock()
		m.running["a"] = true
		m.mu.Unlock()
	}
	if got := stores(); got != 2 {
		t.Errorf("%d allocations recorded for 5 intents, want 2: the first and the resize", got)
	}
	store.mu.Lock()
	got := store.allocs["a"]["app"].Requests[corev1.ResourceMemory]
	store.mu.Unlock()
	if got.String() != "300Mi" {
		t.Errorf("recorded %s, want the resize's 300Mi", got.String())
	}
}

// kubelet's TestSortPendingResizes, ported: a resize that raises no request
// first, then the highest priority, then the only Guaranteed pod, then the
// resize deferred longest, the one never deferred last; whatever order they
// come in.
func TestPendingResizeOrder(t *testing.T) {
	resized := func(uid string, was, is string) *pod {
		allocated := applyOf(uid, 1, was).Intent.Pod
		desired := applyOf(uid, 2, is)
		return &pod{uid: uid, desired: &desired, allocated: allocated}
	}
	shrinks := resized("shrinks", "1Gi", "500Mi")
	priority := resized("priority", "1Gi", "1500Mi")
	priority.desired.Intent.Pod.Spec.Priority = new(int32(100))
	guaranteed := resized("guaranteed", "1Gi", "1500Mi")
	guaranteed.desired.Intent.Pod.Status.QOSClass = corev1.PodQOSGuaranteed
	older, newer, never := resized("older", "1Gi", "1500Mi"), resized("newer", "1Gi", "1500Mi"), resized("never", "1Gi", "1500Mi")
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	older.resizePending = &schemas.PodCondition{Type: schemas.PodResizePending, Reason: "Deferred", LastTransitionTime: at}
	newer.resizePending = &schemas.PodCondition{Type: schemas.PodResizePending, Reason: "Deferred", LastTransitionTime: at.Add(5 * time.Millisecond)}

	want := []*pod{shrinks, priority, guaranteed, older, newer, never}
	name := func(ps []*pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.uid)
		}
		return out
	}
	reversed := slices.Clone(want)
	slices.Reverse(reversed)
	for _, in := range [][]*pod{want, reversed} {
		got := slices.Clone(in)
		slices.SortStableFunc(got, resizeOrder)
		if !slices.Equal(got, want) {
			t.Errorf("from %v: %v, want %v", name(in), name(got), name(want))
		}
	}
}

// On a node of 1Gi: three pods' resizes deferred, then a fourth's of higher
// priority; when room for one frees, the higher priority takes it, as
// kubelet's retry of pending resizes in order, whichever pod syncs first.
func TestTheHigherPriorityTakesTheRoomFirst(t *testing.T) {
	m := &scriptedManager{running: map[string]bool{}}
	w, _ := admittingWorkers(t, m, 110)
	ctx, cancel := context.WithCancel(t.Context())
	var running sync.WaitGroup
	running.Go(func() { w.Run(ctx, time.Second) })
	t.Cleanup(func() { cancel(); running.Wait() })
	if err := w.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	apply := func(uid string, seq uint64, memory string, priority int32) Report {
		d := applyOf(uid, seq, memory)
		d.Intent.Pod.Spec.Priority = &priority
		return w.Sync(ctx, d)
	}
	small := []string{"low-0", "low-1", "low-2", "high"}
	if rep := apply("big", 1, "700Mi", 0); rep.Refused != nil || rep.Err != nil {
		t.Fatalf("big: %+v", rep)
	}
	for i, uid := range small {
		if rep := apply(uid, uint64(2+i), "50Mi", int32(100*(i/3))); rep.Refused != nil || rep.Err != nil {
			t.Fatalf("%s: %+v", uid, rep)
		}
	}
	for i, uid := range small { // 900Mi held: 200Mi more do not fit
		if c := pendingOf(apply(uid, uint64(10+i), "250Mi", int32(100*(i/3))).Status); c == nil || c.Reason != "Deferred" {
			t.Fatalf("%s's resize: pending %+v, want Deferred", uid, c)
		}
	}
	if rep := apply("big", 20, "600Mi", 0); pendingOf(rep.Status) != nil { // room for one
		t.Fatalf("big's shrink: %+v", rep)
	}
	syncedSmall := func() int64 {
		m.mu.Lock()
		defer m.mu.Unlock()
		var sum int64
		for _, uid := range small {
			sum += m.synced[uid].Spec.Containers[0].Resources.Requests.Memory().Value()
		}
		return sum
	}
	poll.Until(t, 30*time.Second, func() string {
		a := w.Allocated()
		return "one deferred resize taken: allocated " + a.Memory().String()
	}, func() bool {
		a := w.Allocated()
		return a.Memory().String() == "1000Mi" && syncedSmall() == 400<<20
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, uid := range small {
		got, want := m.synced[uid].Spec.Containers[0].Resources.Requests.Memory().String(), "50Mi"
		if uid == "high" {
			want = "250Mi"
		}
		if got != want {
			t.Errorf("%s synced with %s, want %s", uid, got, want)
		}
	}
}
