package events_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
)

// startPublisher provisions the streams on js and runs a publisher for node n1
// until the test ends.
func startPublisher(t *testing.T, js jetstream.JetStream, cfg events.Config) *events.EventPublisher {
	t.Helper()
	jetlettest.Provision(t, js)
	p, _ := runPublisher(t, js, cfg)
	return p
}

// runPublisher runs a publisher for node n1 until stop is called or the test
// ends.
func runPublisher(t *testing.T, js jetstream.JetStream, cfg events.Config) (p *events.EventPublisher, stop func()) {
	t.Helper()
	cfg.Node = "n1"
	p, err := events.New(js, cfg)
	if err != nil {
		t.Fatal(err)
	}
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

// New checks the node, prefix and JetStream with natsjs.Prepare (whose test
// has the cases), and its own buffer.
func TestNewRefusesNoBuffer(t *testing.T) {
	js := struct{ jetstream.JetStream }{}
	if _, err := events.New(js, events.Config{Node: "n1", EventBuffer: -1}); !errors.Is(err, events.ErrInvalidConfig) {
		t.Errorf("New with a negative buffer: %v, want ErrInvalidConfig", err)
	}
	if _, err := events.New(nil, events.Config{Node: "n1"}); !errors.Is(err, events.ErrInvalidConfig) {
		t.Errorf("New without JetStream: %v, want ErrInvalidConfig", err)
	}
}

func TestEmitStoresEventsOnceByIDInOrder(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	p := startPublisher(t, js, events.Config{})
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

func TestEmitDropsWhenFullAndSaysSo(t *testing.T) {
	// No Run: nothing drains the buffer.
	_, js := natstest.Connect(t, natstest.RunServer(t))
	m := events.NewMetrics(nil)
	p, err := events.New(js, events.Config{Node: "n1", EventBuffer: 2, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
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
	p := startPublisher(t, js, events.Config{})

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
