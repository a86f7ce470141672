package podworkers

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

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
