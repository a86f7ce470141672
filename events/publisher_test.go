package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/bus"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// startPublisher provisions the streams on js and runs a publisher for node n1
// until the test ends.
func startPublisher(t *testing.T, js jetstream.JetStream, cfg events.PublisherConfig) *events.Publisher {
	t.Helper()
	if err := bus.Provision(t.Context(), js, defaultStreams(t), zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	p, _ := runPublisher(t, js, cfg)
	return p
}

// defaultStreams is the contract's default streams and buckets.
func defaultStreams(t *testing.T) bus.StreamsConfig {
	t.Helper()
	var cfg bus.StreamsConfig
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runPublisher runs a publisher for node n1 until stop is called or the test
// ends.
func runPublisher(t *testing.T, js jetstream.JetStream, cfg events.PublisherConfig) (p *events.Publisher, stop func()) {
	t.Helper()
	cfg.Node = "n1"
	p = events.NewPublisher(js, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return p, stop
}

func tracedContext(t *testing.T) (context.Context, string) {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
}

func TestEmitStoresEventsOnceByIDInOrder(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	p := startPublisher(t, js, events.PublisherConfig{})
	ctx, traceparent := tracedContext(t)
	// An event naming no pod has no subject: dropped, it holds nothing back.
	p.Emit(ctx, schemas.LifecycleEvent{ID: "x.started", Type: schemas.EventContainerStarted})
	for i := range 100 {
		ev := schemas.LifecycleEvent{ID: fmt.Sprintf("c%d.started", i%50), Type: schemas.EventContainerStarted, UID: "u1", Container: "app"}
		p.Emit(ctx, ev)
	}
	if err := p.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	stream, _ := js.Stream(t.Context(), schemas.StreamEvents)
	info, _ := stream.Info(t.Context())
	if info.State.Msgs != 50 {
		t.Fatalf("%d events stored, want 50 (each id once)", info.State.Msgs)
	}
	m, err := stream.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "jetlet.event.n1.u1.ContainerStarted" || m.Header.Get("Nats-Msg-Id") != "c0.started" || m.Header.Get("traceparent") != traceparent {
		t.Errorf("first event: subject %s headers %v", m.Subject, m.Header)
	}
	var ev schemas.LifecycleEvent
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Node != "n1" || ev.Kind != schemas.KindLifecycleEvent || ev.APIVersion != schemas.APIVersion {
		t.Errorf("event envelope not filled: %+v", ev)
	}
}

func TestPutStatusKeepsNewestAndExpiresTerminated(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	p := startPublisher(t, js, events.PublisherConfig{TerminatedStatusTTL: 90 * time.Second})
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
	p := startPublisher(t, js, events.PublisherConfig{StatusRefreshWindow: time.Hour})
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
	p := startPublisher(t, js, events.PublisherConfig{StatusRefreshWindow: 20 * time.Millisecond})
	for rev := int64(1); rev <= 3; rev++ {
		p.RefreshStatus(&schemas.PodStatus{UID: "u1", Revision: rev, Phase: schemas.PhaseRunning})
	}
	poll.Until(t, 10*time.Second, poll.Msg("the refresh stored without a Flush"), func() bool {
		revs := written("n1.u1")
		return len(revs) > 0 && revs[len(revs)-1] == 3
	})
}

func TestEmitDropsWhenFullAndSaysSo(t *testing.T) {
	// No Run: nothing drains the buffer.
	_, js := natstest.Connect(t, natstest.RunServer(t))
	m := events.NewMetrics(nil)
	p := events.NewPublisher(js, events.PublisherConfig{Node: "n1", EventBuffer: 2, Metrics: m})
	for i := range 5 {
		p.Emit(context.Background(), schemas.LifecycleEvent{ID: fmt.Sprint(i), UID: "u1", Type: schemas.EventBackOff})
	}
	if got := testutil.ToFloat64(m.EventsDropped); got != 3 {
		t.Errorf("dropped %v, want 3", got)
	}
	if !p.TakeDropped() {
		t.Error("TakeDropped = false after drops")
	}
	if p.TakeDropped() {
		t.Error("TakeDropped did not clear")
	}
}

func TestEventsSurviveANATSRestart(t *testing.T) {
	dir := t.TempDir()
	opts := natstest.Options(dir)
	srv := natstest.Start(t, opts)
	opts.Port = srv.Addr().(*net.TCPAddr).Port // the same port again after the restart
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	p := startPublisher(t, js, events.PublisherConfig{})

	srv.Shutdown()
	srv.WaitForShutdown()
	for i := range 20 {
		p.Emit(context.Background(), schemas.LifecycleEvent{ID: fmt.Sprint("e", i), UID: "u1", Type: schemas.EventContainerDied})
	}
	natstest.Start(t, opts)

	flushCtx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := p.Flush(flushCtx); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(t.Context(), schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if n := stream.CachedInfo().State.Msgs; n != 20 {
		t.Fatalf("%d events stored across the restart, want 20", n)
	}
}

func TestHeartbeatWritesTheNodeRecord(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	startPublisher(t, js, events.PublisherConfig{})
	kv, _ := js.KeyValue(t.Context(), schemas.BucketNodes)
	w, err := kv.Watch(t.Context(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		events.RunHeartbeat(ctx, js, time.Hour, func() schemas.NodeRecord {
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
