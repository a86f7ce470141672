package events_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// window is the events stream's duplicate window in these tests: short, so
// that they can outlast it.
const window = time.Second

func provisionShortWindow(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	jetlettest.Provision(t, js, func(c *natsjs.StreamsConfig) { c.DuplicateWindow = window })
}

func waitWindowExpired(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	jetlettest.WaitDuplicateWindow(t, js, "jetlet.event.n1.probe.BackOff", 30*time.Second)
}

func emitN(p *events.EventPublisher, uid string, from, to int) {
	for i := from; i < to; i++ {
		p.Emit(context.Background(), schemas.LifecycleEvent{ID: fmt.Sprintf("%s-c%d.ContainerStarted", uid, i), Type: schemas.EventContainerStarted, UID: uid})
	}
}

func flush(t *testing.T, p *events.EventPublisher) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// storedOnce returns how many events of uid the stream holds, failing the
// test if one id is stored twice.
func storedOnce(t *testing.T, js jetstream.JetStream, uid string) int {
	t.Helper()
	evs, err := jetlettest.ReadAll[schemas.LifecycleEvent](js, schemas.StreamEvents, "jetlet.event.n1."+uid+".*")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ev := range evs {
		if seen[ev.ID] {
			t.Errorf("event %s stored twice", ev.ID)
		}
		seen[ev.ID] = true
	}
	return len(evs)
}

func TestLedgerStoresEachEventOnceAcrossARestartBeyondTheWindow(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	provisionShortWindow(t, js)

	// The first publisher stops (as at a crash) somewhere in the middle.
	const n = 1500 // more than one fetch of read-back
	first, stop := runPublisher(t, js, events.Config{})
	emitN(first, "u1", 0, n)
	poll.Until(t, 30*time.Second, poll.Msg("some events stored"), func() bool {
		info, err := js.Stream(t.Context(), schemas.StreamEvents)
		return err == nil && info.CachedInfo().State.Msgs >= n/3
	})
	stop()
	waitWindowExpired(t, js)

	// The next one is told every fact again, and some new ones.
	m := events.NewMetrics(nil)
	second, _ := runPublisher(t, js, events.Config{Metrics: m})
	emitN(second, "u1", 0, n+5)
	emitN(second, "u2", 0, 3)
	flush(t, second)
	if got := storedOnce(t, js, "u1"); got != n+5 {
		t.Errorf("u1: %d events stored, want %d", got, n+5)
	}
	if got := storedOnce(t, js, "u2"); got != 3 {
		t.Errorf("u2: %d events stored, want 3", got)
	}
	if got := testutil.ToFloat64(m.EventsStored); got == 0 {
		t.Error("no event was found already stored")
	}
}

func TestLedgerReadsATerminatedPodBackBeforeItsNextEvent(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	provisionShortWindow(t, js)
	p, _ := runPublisher(t, js, events.Config{})
	emitN(p, "u1", 0, 2)
	p.Emit(context.Background(), schemas.LifecycleEvent{ID: "s1.PodTerminated", Type: schemas.EventPodTerminated, UID: "u1"})
	flush(t, p)
	waitWindowExpired(t, js)

	// Its ledger went with the termination; the stream still knows.
	emitN(p, "u1", 0, 3)
	flush(t, p)
	if got := storedOnce(t, js, "u1"); got != 4 {
		t.Errorf("%d events stored, want 4", got)
	}
}

func TestLedgerHoldsEventsBackUntilItCanReadTheStream(t *testing.T) {
	opts := natstest.Options(t.TempDir())
	srv := natstest.Start(t, opts)
	opts.Port = srv.Addr().(*net.TCPAddr).Port // the same port again after the restart
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	// Requests fail fast while the server is away.
	js, _ := jetstream.New(nc, jetstream.WithDefaultTimeout(200*time.Millisecond))
	provisionShortWindow(t, js)
	first, stop := runPublisher(t, js, events.Config{})
	emitN(first, "u1", 0, 5)
	flush(t, first)
	stop()
	waitWindowExpired(t, js)

	srv.Shutdown()
	srv.WaitForShutdown()
	failures := natsjs.NewPublishFailures(nil)
	second, _ := runPublisher(t, js, events.Config{Failures: failures})
	emitN(second, "u1", 0, 10)
	poll.Until(t, 30*time.Second, poll.Msg("a failed read-back"), func() bool {
		return testutil.ToFloat64(failures.WithLabelValues("ledger")) > 0
	})
	natstest.Start(t, opts)

	flush(t, second)
	if got := storedOnce(t, js, "u1"); got != 10 {
		t.Errorf("%d events stored, want 10", got)
	}
}

// BenchmarkEvents publishes b.N events on a local server, each of a new pod
// (so each reads its pod's empty ledger back first) or all of one pod.
func BenchmarkEvents(b *testing.B) {
	for _, bc := range []struct {
		name string
		uid  func(i int) string
	}{
		{"NewPodEach", func(i int) string { return fmt.Sprintf("pod-%d", i) }},
		{"OnePod", func(int) string { return "pod" }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			_, js := natstest.Connect(b, natstest.RunServer(b))
			var cfg natsjs.StreamsConfig
			cfg.SetDefaults()
			if err := natsjs.Provision(b.Context(), js, cfg, zerolog.Nop()); err != nil {
				b.Fatal(err)
			}
			p, err := events.New(js, events.Config{Node: "n1"})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { p.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			b.ResetTimer()
			for i := range b.N {
				p.Emit(context.Background(), schemas.LifecycleEvent{ID: fmt.Sprintf("s%d.SandboxCreated", i), Type: schemas.EventSandboxCreated, UID: bc.uid(i)})
			}
			if err := p.Flush(b.Context()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// A copy of an event that the servers hold past the duplicate window (the
// node timed out, read its pod back without it and stored it again) must
// not be stored a second time.
func TestALateCopyOfAnEventIsRefusedAtAnyAge(t *testing.T) {
	nc, js := natstest.Connect(t, natstest.RunServer(t))
	provisionShortWindow(t, js)
	sent, err := nc.SubscribeSync("jetlet.event.n1.u1.>")
	if err != nil {
		t.Fatal(err)
	}
	p, _ := runPublisher(t, js, events.Config{})
	emitN(p, "u1", 0, 1)
	flush(t, p)
	first, err := sent.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitWindowExpired(t, js)
	if err := jetlettest.Republish(nc, first); !natsjs.WrongLastSequence(err) {
		t.Errorf("a late copy past the window: %v, want refused for its last sequence", err)
	}
	emitN(p, "u1", 1, 2)
	flush(t, p)
	if err := jetlettest.Republish(nc, first); !natsjs.WrongLastSequence(err) {
		t.Errorf("a late copy after the pod's next event: %v, want refused for its last sequence", err)
	}
	if got := storedOnce(t, js, "u1"); got != 2 {
		t.Errorf("%d events stored, want 2", got)
	}
}
