package consumer_test

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/jetlet/jetlet/consumer"
	"github.com/jetlet/jetlet/consumer/checkpoint"
	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// offlineSyncer is a fakeSyncer that can start from the checkpoint.
type offlineSyncer struct {
	*fakeSyncer
	offline, resumed []podworkers.Desired // nil until called
}

func (f *offlineSyncer) StartOffline(_ context.Context, desired []podworkers.Desired) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offline = append([]podworkers.Desired{}, desired...)
	return nil
}

func (f *offlineSyncer) Resume(_ context.Context, desired []podworkers.Desired) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumed = append([]podworkers.Desired{}, desired...)
	return nil
}

func seqsOf(ds []podworkers.Desired) map[string]uint64 {
	out := map[string]uint64{}
	for _, d := range ds {
		out[d.UID] = d.IntentSeq
	}
	return out
}

// TestBusAwayStartsFromCheckpointThenTheStreamWins: while the bus is not
// up, the consumer starts the pods its checkpoint names (not the stream's);
// once it is, the stream's desired state is handed over with Resume, not
// Start, and the checkpoint rewritten to say the same (a pod only the
// checkpoint named is gone from it); applied intents are recorded after.
func TestBusAwayStartsFromCheckpointThenTheStreamWins(t *testing.T) {
	h := newHarness(t)
	seqA := h.publish("jetlet.intent.n1.a", podIntent("a", 1))
	seqB := h.publish("jetlet.intent.n1.b", podIntent("b", 1))

	cp := checkpoint.New(t.TempDir())
	var in, gone schemas.PodIntent
	if err := json.Unmarshal(podIntent("a", 1), &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(podIntent("gone", 1), &gone); err != nil {
		t.Fatal(err)
	}
	in.Op, gone.Op = schemas.OpApply, schemas.OpApply
	for _, d := range []podworkers.Desired{{UID: "a", Intent: &in, IntentSeq: 900}, {UID: "gone", Intent: &gone, IntentSeq: 901}} {
		if err := cp.Record(d); err != nil {
			t.Fatal(err)
		}
	}

	syncer := &offlineSyncer{fakeSyncer: newFakeSyncer()}
	busUp := make(chan struct{})
	pub, err := events.New(h.js, events.Config{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := consumer.New(h.js, newResults(t, h.js), pub, syncer, consumer.Config{
		Node: "n1", Checkpoint: cp, BusUp: busUp, OfflineAfter: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { pub.Run(ctx) })
	wg.Go(func() {
		if err := c.Run(ctx, 10*time.Second); err != nil {
			t.Errorf("consumer: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })

	poll.Until(t, 30*time.Second, poll.Msg("a start from the checkpoint"), func() bool {
		syncer.mu.Lock()
		defer syncer.mu.Unlock()
		return syncer.offline != nil
	})
	if _, ok := c.OfflineSince(); !ok {
		t.Error("OfflineSince: not offline after a start from the checkpoint")
	}
	syncer.mu.Lock()
	if got, want := seqsOf(syncer.offline), map[string]uint64{"a": 900, "gone": 901}; !maps.Equal(got, want) {
		t.Errorf("started offline with %v, want the checkpoint's %v", got, want)
	}
	syncer.mu.Unlock()

	close(busUp)
	poll.Until(t, 30*time.Second, poll.Msg("the consumer to attach"), c.Attached)
	syncer.mu.Lock()
	if syncer.started != nil {
		t.Error("Start called after a start from the checkpoint; want Resume")
	}
	if got, want := seqsOf(syncer.resumed), map[string]uint64{"a": seqA, "b": seqB}; !maps.Equal(got, want) {
		t.Errorf("resumed with %v, want the stream's %v", got, want)
	}
	syncer.mu.Unlock()
	if _, ok := c.OfflineSince(); ok {
		t.Error("OfflineSince: still offline after the stream's desired state was handed over")
	}
	kept, err := cp.Load()
	if err != nil {
		t.Fatal(err)
	}
	// a's file keeps the older sequence when only its sequence changed
	// (here decoding also defaulted its spec).
	got := seqsOf(kept)
	if a := got["a"]; len(got) != 2 || a != 900 && a != seqA || got["b"] != seqB {
		t.Errorf("checkpoint after recovery: %v, want a at 900 or %d, b at %d, nothing else", got, seqA, seqB)
	}

	seqC := h.publish("jetlet.intent.n1.c", podIntent("c", 1))
	h.results(3) // a's and b's (answered now), c's
	kept, err = cp.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := seqsOf(kept)["c"]; got != seqC {
		t.Errorf("checkpoint of c after its intent %d was applied: %d", seqC, got)
	}
}
