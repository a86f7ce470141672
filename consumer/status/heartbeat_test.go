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
		}, zerolog.Nop())
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
