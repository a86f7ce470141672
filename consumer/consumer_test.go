package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/consumer"
	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// fakeSyncer records the intents it is asked to apply. A sync blocks while
// gate is closed, so that tests can make intents pile up behind it.
type fakeSyncer struct {
	mu      sync.Mutex
	applied map[string][]uint64 // uid → intent seqs synced, in order
	gate    chan struct{}
	running []consumer.PodRef
}

func newFakeSyncer() *fakeSyncer {
	g := make(chan struct{})
	close(g)
	return &fakeSyncer{applied: map[string][]uint64{}, gate: g}
}

func (f *fakeSyncer) Sync(ctx context.Context, want consumer.Desired) consumer.Report {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	select {
	case <-gate:
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied[want.UID] = append(f.applied[want.UID], want.IntentSeq)
	return consumer.Report{
		Actions: []schemas.ActionResult{{Action: schemas.ActionStartContainer, Target: "app"}},
		Status:  &schemas.PodStatus{UID: want.UID, Phase: schemas.PhaseRunning, IntentSeq: want.IntentSeq},
	}
}

func (f *fakeSyncer) RunningPods(context.Context) ([]consumer.PodRef, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.running, nil
}

type harness struct {
	t    *testing.T
	nc   *nats.Conn
	js   jetstream.JetStream
	sync *fakeSyncer
	c    *consumer.Consumer
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	nc, js := natstest.Connect(t, natstest.RunServer(t))
	var sc events.StreamsConfig
	sc.SetDefaults()
	if err := events.Provision(t.Context(), js, sc, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, nc: nc, js: js, sync: newFakeSyncer()}
}

// start runs the consumer until the test ends, or until stop. wrap, when
// set, stands between the consumer and the real publisher.
func (h *harness) start(cfg consumer.Config, wrap ...func(*events.Publisher) consumer.Publisher) (stop func()) {
	h.t.Helper()
	cfg.Node = "n1"
	pub := events.NewPublisher(h.js, events.PublisherConfig{Node: "n1"})
	var cp consumer.Publisher = pub
	for _, w := range wrap {
		cp = w(pub)
	}
	c, err := consumer.New(h.js, cp, h.sync, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { pub.Run(ctx) })
	wg.Go(func() {
		if err := c.Run(ctx, 10*time.Second); err != nil {
			h.t.Errorf("consumer: %v", err)
		}
	})
	stop = func() { cancel(); wg.Wait() }
	h.t.Cleanup(stop)
	poll.Until(h.t, 30*time.Second, poll.Msg("the consumer to attach"), c.Attached)
	return stop
}

func podIntent(uid string, rev int64) []byte {
	return []byte(fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":%d,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"},
	         "spec":{"containers":[{"name":"app","image":"busybox:1.36","command":["sleep","60"]}]}}}`, rev, strings.ToLower(uid), uid))
}

func (h *harness) publish(subject string, body []byte) uint64 {
	h.t.Helper()
	ack, err := h.js.Publish(h.t.Context(), subject, body)
	if err != nil {
		h.t.Fatal(err)
	}
	return ack.Sequence
}

// results waits until n results are stored and returns them in stream order.
func (h *harness) results(n int) []schemas.SyncResult {
	h.t.Helper()
	return readAll[schemas.SyncResult](h.t, h.js, schemas.StreamResults, "jetlet.result.>", n)
}

// readAll waits until the stream holds at least n messages on filter and
// returns them in order.
func readAll[T any](t *testing.T, js jetstream.JetStream, stream, filter string, n int) []T {
	t.Helper()
	var out []T
	var err error
	poll.Until(t, 60*time.Second, func() string {
		return fmt.Sprintf("%d messages on %s, have %d (%v)", n, filter, len(out), err)
	}, func() bool {
		out, err = jetlettest.ReadAll[T](js, stream, filter)
		return err == nil && len(out) >= n
	})
	return out
}

func TestEveryIntentGetsExactlyOneResultInOrder(t *testing.T) {
	h := newHarness(t)
	// Hold the first syncs so that intents pile up and are coalesced.
	h.sync.gate = make(chan struct{})
	h.start(consumer.Config{Workers: 8})

	const uids, perUID = 50, 4
	seqs := map[uint64]string{}
	for round := range perUID {
		for u := range uids {
			uid := fmt.Sprintf("uid-%02d", u)
			seqs[h.publish("jetlet.intent.n1."+uid, podIntent(uid, int64(round+1)))] = uid
		}
	}
	close(h.sync.gate)

	results := h.results(uids * perUID)
	if len(results) != uids*perUID {
		t.Fatalf("%d results, want %d", len(results), uids*perUID)
	}
	seen := map[uint64]bool{}
	lastSeq := map[string]uint64{}
	superseded := 0
	for _, r := range results {
		if seen[r.IntentSeq] {
			t.Errorf("intent %d answered twice", r.IntentSeq)
		}
		seen[r.IntentSeq] = true
		if seqs[r.IntentSeq] != r.UID {
			t.Errorf("result for intent %d names uid %s, want %s", r.IntentSeq, r.UID, seqs[r.IntentSeq])
		}
		if r.IntentSeq < lastSeq[r.UID] {
			t.Errorf("uid %s: result for intent %d after %d", r.UID, r.IntentSeq, lastSeq[r.UID])
		}
		lastSeq[r.UID] = r.IntentSeq
		switch r.Outcome {
		case schemas.OutcomeSuperseded:
			superseded++
		case schemas.OutcomeSynced:
		default:
			t.Errorf("intent %d: outcome %s (%s)", r.IntentSeq, r.Outcome, r.Error)
		}
	}
	if superseded == 0 {
		t.Error("no intent was superseded although they piled up behind held syncs")
	}
	// Every pod ends on its newest intent.
	h.sync.mu.Lock()
	defer h.sync.mu.Unlock()
	for uid, applied := range h.sync.applied {
		if got, want := applied[len(applied)-1], lastSeq[uid]; got != want {
			t.Errorf("uid %s last synced intent %d, want the newest, %d", uid, got, want)
		}
	}
}

func TestBadIntentsAreRejectedOrDeadLetteredAndOthersCarryOn(t *testing.T) {
	h := newHarness(t)
	h.start(consumer.Config{})

	privileged := `{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":7,"pod":{"metadata":{"name":"p","namespace":"default","uid":"priv"},
	  "spec":{"containers":[{"name":"app","image":"busybox","command":["true"],"securityContext":{"privileged":true}}]}}}`
	pvc := `{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","pod":{"metadata":{"name":"p","namespace":"default","uid":"pvc"},
	  "spec":{"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"c"}}],
	  "containers":[{"name":"app","image":"busybox","command":["true"]}]}}}`
	// A refused intent is reported with what its envelope says, unless the
	// envelope cannot be read or names another pod.
	cases := []struct {
		uid, body, want string
		ns, name        string
		revision        int64
	}{
		{"notjson", `{not json`, "malformed", "", "", 0},
		{"wronguid", string(podIntent("other", 1)), "pod.metadata.uid", "", "", 0},
		{"pvc", pvc, "persistentVolumeClaim", "default", "p", 0},
		{"priv", privileged, "privileged", "default", "p", 7},
	}
	for _, c := range cases {
		h.publish("jetlet.intent.n1."+c.uid, []byte(c.body))
	}
	h.publish("jetlet.intent.n1", podIntent("x", 1))
	h.publish("jetlet.intent.n1.good", podIntent("good", 1))

	results := h.results(len(cases) + 1)
	byUID := map[string]schemas.SyncResult{}
	for _, r := range results {
		byUID[r.UID] = r
	}
	for _, c := range cases {
		r := byUID[c.uid]
		if r.Outcome != schemas.OutcomeRejected || !strings.Contains(r.Error, c.want) {
			t.Errorf("%s: outcome %s error %q; want Rejected naming %q", c.uid, r.Outcome, r.Error, c.want)
		}
		if r.Namespace != c.ns || r.Name != c.name || r.Revision != c.revision {
			t.Errorf("%s: result for %s/%s revision %d; want %s/%s revision %d", c.uid, r.Namespace, r.Name, r.Revision, c.ns, c.name, c.revision)
		}
	}
	if r := byUID["good"]; r.Outcome != schemas.OutcomeSynced {
		t.Errorf("good pod: %s %s", r.Outcome, r.Error)
	}
	dead := readAll[json.RawMessage](t, h.js, schemas.StreamDead, "jetlet.dead.>", 1)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dead))
	}
	s, _ := h.js.Stream(t.Context(), schemas.StreamDead)
	m, err := s.GetMsg(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m.Header.Get(schemas.HeaderError), "no valid pod uid") {
		t.Errorf("Jetlet-Error = %q", m.Header.Get(schemas.HeaderError))
	}
	rejected := readAll[schemas.LifecycleEvent](t, h.js, schemas.StreamEvents, "jetlet.event.>", len(cases))
	for _, ev := range rejected {
		if ev.Type != schemas.EventIntentRejected {
			t.Errorf("event %s, want IntentRejected", ev.Type)
		}
		if ev.UID == "priv" && (ev.Namespace != "default" || ev.Pod != "p" || ev.Revision != 7) {
			t.Errorf("IntentRejected of the privileged pod for %s/%s revision %d; want default/p revision 7", ev.Namespace, ev.Pod, ev.Revision)
		}
	}
}

func TestStaleRevisionIsNotApplied(t *testing.T) {
	h := newHarness(t)
	h.start(consumer.Config{})
	h.publish("jetlet.intent.n1.u1", podIntent("u1", 5))
	h.results(1)
	h.publish("jetlet.intent.n1.u1", podIntent("u1", 3))
	results := h.results(2)
	if r := results[1]; r.Outcome != schemas.OutcomeStale || r.Revision != 3 {
		t.Errorf("second result %s rev %d, want Stale rev 3", r.Outcome, r.Revision)
	}
	h.sync.mu.Lock()
	defer h.sync.mu.Unlock()
	if n := len(h.sync.applied["u1"]); n != 1 {
		t.Errorf("synced %d times, want once", n)
	}
}

func TestRecoveryReplaysDesiredStateAndDeletesOrphans(t *testing.T) {
	h := newHarness(t)
	seq := h.publish("jetlet.intent.n1.u1", podIntent("u1", 2))
	h.publish("jetlet.intent.n1.u1", podIntent("u1", 1)) // stale: not the desired state
	h.sync.running = []consumer.PodRef{{UID: "u1"}, {UID: "orphan", Namespace: "default", Name: "old"}}
	h.start(consumer.Config{})
	h.results(2)
	h.sync.mu.Lock()
	defer h.sync.mu.Unlock()
	if got := h.sync.applied["u1"]; len(got) == 0 || got[0] != seq {
		t.Errorf("u1 synced with %v first, want the replayed intent %d", got, seq)
	}
	if len(h.sync.applied["orphan"]) == 0 {
		t.Error("the orphan pod was not synced (deleted)")
	}
}

// flakyPublisher fails to store the result of one intent once.
type flakyPublisher struct {
	*events.Publisher
	mu      sync.Mutex
	failSeq uint64
}

func (f *flakyPublisher) PublishResult(ctx context.Context, r *schemas.SyncResult) error {
	f.mu.Lock()
	fail := r.IntentSeq == f.failSeq
	if fail {
		f.failSeq = 0
	}
	f.mu.Unlock()
	if fail {
		return errors.New("injected publish failure")
	}
	return f.Publisher.PublishResult(ctx, r)
}

func TestAFailedResultIsRedeliveredAndOrderKept(t *testing.T) {
	h := newHarness(t)
	h.sync.gate = make(chan struct{})
	var pub *flakyPublisher
	h.start(consumer.Config{}, func(p *events.Publisher) consumer.Publisher {
		pub = &flakyPublisher{Publisher: p}
		return pub
	})
	first := h.publish("jetlet.intent.n1.u1", podIntent("u1", 1))
	pub.mu.Lock()
	pub.failSeq = first
	pub.mu.Unlock()
	close(h.sync.gate)
	for rev := int64(2); rev <= 4; rev++ {
		h.publish("jetlet.intent.n1.u1", podIntent("u1", rev))
	}
	results := h.results(4)
	for i := 1; i < len(results); i++ {
		if results[i].IntentSeq <= results[i-1].IntentSeq {
			t.Fatalf("results out of intent order: %d after %d", results[i].IntentSeq, results[i-1].IntentSeq)
		}
	}
	if results[0].IntentSeq != first {
		t.Errorf("first result is for intent %d, want the failed one, %d", results[0].IntentSeq, first)
	}
}

func TestRecoverySyncsAPodWhoseUnansweredIntentsAreNotApplied(t *testing.T) {
	h := newHarness(t)
	stop := h.start(consumer.Config{})
	applied := h.publish("jetlet.intent.n1.u1", podIntent("u1", 1))
	h.results(1)
	stop()
	// While jetlet is away an invalid intent comes: at start-up it is
	// answered Rejected, and the pod must still be synced to intent 1.
	h.publish("jetlet.intent.n1.u1", []byte(`{"not":"an intent"}`))
	h.sync.mu.Lock()
	before := len(h.sync.applied["u1"])
	h.sync.mu.Unlock()
	h.start(consumer.Config{})
	if r := h.results(2)[1]; r.Outcome != schemas.OutcomeRejected {
		t.Fatalf("second intent: %s, want Rejected", r.Outcome)
	}
	var got []uint64
	poll.Until(t, 30*time.Second, poll.Msg("a sync of the pod at start-up"), func() bool {
		h.sync.mu.Lock()
		defer h.sync.mu.Unlock()
		got = h.sync.applied["u1"]
		return len(got) > before
	})
	if got[len(got)-1] != applied {
		t.Fatalf("synced to intent %d at start-up, want %d", got[len(got)-1], applied)
	}
}
