package status_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/consumer/status"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
)

func TestHeartbeatWritesTheNodeRecord(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	jetlettest.Provision(t, js)
	kv, _ := js.KeyValue(t.Context(), schemas.BucketNodes)
	w, err := kv.Watch(t.Context(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		status.RunHeartbeat(ctx, js, time.Hour, func() schemas.NodeRecord {
			return schemas.NodeRecord{Node: "n1", RuntimeName: "jetlet-proc", JetletVersion: "test"}
		}, nil, zerolog.Nop())
	})
	defer func() { cancel(); wg.Wait() }()
	// Bounded: a heartbeat that never comes fails the test, not the run.
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-deadline:
			t.Fatal("no node record stored within 30s")
		case e, ok := <-w.Updates():
			if !ok {
				t.Fatal("the watch ended before a node record was stored")
			}
			if e == nil {
				continue // end of the initial values
			}
			var rec schemas.NodeRecord
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				t.Fatal(err)
			}
			if rec.Kind != schemas.KindNode || rec.RuntimeName != "jetlet-proc" || rec.HeartbeatAt.IsZero() {
				t.Errorf("node record %+v", rec)
			}
			return
		}
	}
}

// A change is written at once, not at the next beat (an hour away here),
// and a burst of changes within ChangeGap is one more write, not one each.
func TestHeartbeatWritesAChangeAtOnce(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	jetlettest.Provision(t, js)
	kv, _ := js.KeyValue(t.Context(), schemas.BucketNodes)
	w, err := kv.Watch(t.Context(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	allocated := 0
	changed := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		status.RunHeartbeat(ctx, js, time.Hour, func() schemas.NodeRecord {
			mu.Lock()
			defer mu.Unlock()
			return schemas.NodeRecord{Node: "n1", Pods: schemas.PodCounts{Total: allocated}}
		}, changed, zerolog.Nop())
	})
	defer func() { cancel(); wg.Wait() }()
	next := func() schemas.NodeRecord {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case <-deadline:
				t.Fatal("no node record stored within 30s")
			case e := <-w.Updates():
				if e == nil {
					continue
				}
				var rec schemas.NodeRecord
				if err := json.Unmarshal(e.Value(), &rec); err != nil {
					t.Fatal(err)
				}
				return rec
			}
		}
	}
	next() // the first beat
	// The first change of the burst is written at once, the others together
	// once ChangeGap has passed: the last record is the last change, and no
	// more than two records come of the three.
	for want := 1; want <= 3; want++ {
		mu.Lock()
		allocated = want
		mu.Unlock()
		changed <- struct{}{}
	}
	var last schemas.NodeRecord
	for writes := 1; last.Pods.Total != 3; writes++ {
		if writes > 2 {
			t.Fatalf("a burst of 3 changes made more than 2 writes (last %d)", last.Pods.Total)
		}
		last = next()
	}
}
