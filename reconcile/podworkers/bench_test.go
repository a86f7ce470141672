package podworkers

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// BenchmarkNoOpSync is Workers.Sync of a running pod with an intent that
// changes nothing, as a flood of no-op intents gives it: a new pod value
// each time (each intent is decoded anew), beside 1,000 other admitted
// pods. It reports the allocation checkpoint's records per sync, each a
// file written and synced twice in jetlet.
func BenchmarkNoOpSync(b *testing.B) {
	m := &scriptedManager{running: map[string]bool{}}
	store := &checkpoints{allocs: map[string]map[string]corev1.ResourceRequirements{}}
	w, _ := admittingWorkers(b, m, 2000)
	w.cfg.Allocations = store
	if err := w.Start(b.Context(), nil); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		admitRunning(b, w, m, applyOf(fmt.Sprintf("other-%d", i), uint64(i+1), "512Ki"))
	}
	seq := uint64(2000)
	admitRunning(b, w, m, applyOf("a", seq, "100Mi"))
	seq++
	w.Sync(b.Context(), applyOf("a", seq, "100Mi")) // the cache holds it running
	store.mu.Lock()
	store.stores = 0
	store.mu.Unlock()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		seq++
		// Received before the last relist: the cache is fresh, as with a
		// runtime's event stream, and the sync asks for no relist.
		want := applyOf("a", seq, "100Mi")
		want.ReceivedAt = time.Time{}
		if rep := w.Sync(b.Context(), want); rep.Err != nil || len(rep.Actions) != 0 {
			b.Fatalf("not a no-op: %+v", rep)
		}
		n++
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	b.ReportMetric(float64(store.stores)/float64(n), "checkpoints/op")
}

// admitRunning syncs want, a new pod, and has m run it.
func admitRunning(b *testing.B, w *Workers, m *scriptedManager, want Desired) {
	b.Helper()
	if rep := w.Sync(b.Context(), want); rep.Err != nil || rep.Refused != nil {
		b.Fatalf("%s: %+v", want.UID, rep)
	}
	m.mu.Lock()
	m.running[want.UID] = true
	m.mu.Unlock()
}
