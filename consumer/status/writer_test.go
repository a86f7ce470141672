package status_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/consumer/status"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// startWriter provisions the buckets on js and runs a status writer for
// node n1 until the test ends.
func startWriter(t *testing.T, js jetstream.JetStream, cfg status.Config) *status.StatusWriter {
	t.Helper()
	jetlettest.Provision(t, js)
	cfg.Node = "n1"
	w, err := status.New(js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return w
}

// New checks the node and JetStream with natsjs.Prepare (whose test has the
// cases), and its own durations.
func TestNewRefusesDurationsThatCannotWork(t *testing.T) {
	js := struct{ jetstream.JetStream }{}
	for name, cfg := range map[string]status.Config{
		"no node":                 {},
		"TTL under a second":      {Node: "n1", TerminatedStatusTTL: time.Millisecond},
		"negative refresh window": {Node: "n1", RefreshWindow: -time.Second},
	} {
		if _, err := status.New(js, cfg); !errors.Is(err, status.ErrInvalidConfig) {
			t.Errorf("%s: New: %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := status.New(js, status.Config{Node: "n1"}); err != nil {
		t.Errorf("New with the defaults: %v", err)
	}
}

func TestPutStatusKeepsNewestAndExpiresTerminated(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	p := startWriter(t, js, status.Config{TerminatedStatusTTL: 90 * time.Second})
	for rev := int64(1); rev <= 5; rev++ {
		p.PutStatus(&schemas.PodStatus{UID: "u1", Name: "web", Namespace: "default", Revision: rev, Phase: schemas.PhaseRunning})
	}
	p.PutStatus(&schemas.PodStatus{UID: "u2", Phase: schemas.PhaseTerminated})
	if err := p.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(t.Context(), schemas.BucketStatus)
	e, err := kv.Get(t.Context(), "n1.u1")
	if err != nil {
		t.Fatal(err)
	}
	var st schemas.PodStatus
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatal(err)
	}
	if st.Revision != 5 {
		t.Errorf("stored revision %d, want the newest, 5", st.Revision)
	}
	stream, _ := js.Stream(t.Context(), "KV_"+schemas.BucketStatus)
	m, err := stream.GetLastMsgForSubject(t.Context(), "$KV.jetlet_status.n1.u2")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get("Nats-TTL"); got != "1m30s" {
		t.Errorf("Terminated status TTL header %q, want 1m30s", got)
	}
}

// statusWrites records the statuses written to the bucket (the bucket keeps
// one per key, so its history cannot tell): revisions(key) returns the
// revisions written for key, oldest first.
func statusWrites(t *testing.T, nc *nats.Conn) (revisions func(key string) []int64) {
	t.Helper()
	var mu sync.Mutex // guards written, appended to by the subscription
	written := map[string][]int64{}
	_, err := nc.Subscribe("$KV."+schemas.BucketStatus+".>", func(m *nats.Msg) {
		var st schemas.PodStatus
		if err := json.Unmarshal(m.Data, &st); err != nil {
			t.Error(err)
			return
		}
		key := strings.TrimPrefix(m.Subject, "$KV."+schemas.BucketStatus+".")
		mu.Lock()
		written[key] = append(written[key], st.Revision)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return func(key string) []int64 {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(written[key])
	}
}

func TestRefreshStatusIsCoalescedUntilItsWindowOrAVisibleChange(t *testing.T) {
	nc, js := natstest.Connect(t, natstest.RunServer(t))
	written := statusWrites(t, nc)
	// A window no test waits out: refreshes are stored by a PutStatus of the
	// pod or by Flush only.
	p := startWriter(t, js, status.Config{RefreshWindow: time.Hour})
	running := func(uid string, rev int64, phase schemas.PodPhase) *schemas.PodStatus {
		return &schemas.PodStatus{UID: uid, Revision: rev, Phase: phase}
	}
	p.PutStatus(running("u1", 1, schemas.PhaseRunning))
	// (A refresh of a status still waiting replaces it, to be stored as
	// soon.)
	poll.Until(t, 10*time.Second, poll.Msg("u1's first status stored"), func() bool { return len(written("n1.u1")) == 1 })
	for rev := int64(2); rev <= 4; rev++ {
		p.RefreshStatus(running("u1", rev, schemas.PhaseRunning))
		p.RefreshStatus(running("u2", rev, schemas.PhaseRunning))
	}
	// u3's status is stored after u1's first: once it is there, u1's
	// refreshes were not stored at once.
	p.PutStatus(running("u3", 1, schemas.PhaseRunning))
	poll.Until(t, 10*time.Second, poll.Msg("u3's status stored"), func() bool { return len(written("n1.u3")) == 1 })
	if got := written("n1.u1"); !slices.Equal(got, []int64{1}) {
		t.Fatalf("u1's stored revisions %v before its next visible change, want [1]", got)
	}
	// A visible change supersedes the refreshes waiting, at once.
	p.PutStatus(running("u1", 5, schemas.PhaseFailed))
	poll.Until(t, 10*time.Second, poll.Msg("u1's visible change stored"), func() bool { return len(written("n1.u1")) == 2 })
	if got := written("n1.u1"); !slices.Equal(got, []int64{1, 5}) {
		t.Errorf("u1's stored revisions %v, want [1 5]: the refreshes coalesced into the change", got)
	}
	// Flush stores what waits for its window: the newest refresh only. (The
	// subscription may see the write after the ack Flush waited for.)
	if err := p.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, poll.Msg("u2's refresh seen stored"), func() bool { return len(written("n1.u2")) > 0 })
	if got := written("n1.u2"); !slices.Equal(got, []int64{4}) {
		t.Errorf("u2's stored revisions %v after Flush, want [4]", got)
	}
}

func TestRefreshStatusIsStoredWhenItsWindowEnds(t *testing.T) {
	nc, js := natstest.Connect(t, natstest.RunServer(t))
	written := statusWrites(t, nc)
	p := startWriter(t, js, status.Config{RefreshWindow: 20 * time.Millisecond})
	for rev := int64(1); rev <= 3; rev++ {
		p.RefreshStatus(&schemas.PodStatus{UID: "u1", Revision: rev, Phase: schemas.PhaseRunning})
	}
	poll.Until(t, 10*time.Second, poll.Msg("the refresh stored without a Flush"), func() bool {
		revs := written("n1.u1")
		return len(revs) > 0 && revs[len(revs)-1] == 3
	})
}

// Stored reads back what the bucket holds of the node's pods it is asked
// for: the newest status of each, none of a deleted key nor of another
// node's.
func TestStoredReadsBackTheNodesNewestStatuses(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	w := startWriter(t, js, status.Config{})
	for rev := int64(1); rev <= 3; rev++ {
		w.PutStatus(&schemas.PodStatus{UID: "u1", Revision: rev, Phase: schemas.PhaseRunning})
		if err := w.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	w.PutStatus(&schemas.PodStatus{UID: "u2", Phase: schemas.PhaseRunning})
	if err := w.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(t.Context(), schemas.BucketStatus)
	if err := kv.Delete(t.Context(), "n1.u2"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "n2.u3", []byte(`{"uid":"u3"}`)); err != nil {
		t.Fatal(err)
	}
	stored, err := w.Stored(t.Context(), []string{"u1", "u2", "u3", "u4"})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored["u1"] == nil || stored["u1"].Revision != 3 {
		t.Errorf("stored %+v, want u1 at revision 3 alone", stored)
	}
}
