package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/consumer"
	"github.com/jetlet/jetlet/consumer/results"
	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// fakeSyncer records the desired state it is started with and the intents
// it is asked to apply. A sync blocks while gate is closed, so that tests
// can make intents pile up behind it.
type fakeSyncer struct {
	mu      sync.Mutex
	started []podworkers.Desired // nil until Start
	applied map[string][]uint64  // uid → intent seqs synced, in order
	early   int                  // syncs asked for before Start
	gate    chan struct{}
}

func newFakeSyncer() *fakeSyncer {
	g := make(chan struct{})
	close(g)
	return &fakeSyncer{applied: map[string][]uint64{}, gate: g}
}

func (f *fakeSyncer) Start(_ context.Context, desired []podworkers.Desired) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append([]podworkers.Desired{}, desired...)
	return nil
}

func (f *fakeSyncer) Sync(ctx context.Context, want podworkers.Desired) podworkers.Report {
	f.mu.Lock()
	gate := f.gate
	if f.started == nil {
		f.early++
	}
	f.mu.Unlock()
	select {
	case <-gate:
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied[want.UID] = append(f.applied[want.UID], want.IntentSeq)
	return podworkers.Report{
		Actions: []schemas.ActionResult{{Action: schemas.ActionStartContainer, Target: "app"}},
		Status:  &schemas.PodStatus{UID: want.UID, Phase: schemas.PhaseRunning, IntentSeq: want.IntentSeq},
	}
}

type harness struct {
	t         *testing.T
	nc        *nats.Conn
	js        jetstream.JetStream
	sync      *fakeSyncer
	c         *consumer.Consumer
	sentinels int
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	nc, js := natstest.Connect(t, natstest.RunServer(t))
	var sc natsjs.StreamsConfig
	sc.SetDefaults()
	if err := natsjs.Provision(t.Context(), js, sc, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, nc: nc, js: js, sync: newFakeSyncer()}
}

// start runs the consumer until the test ends, or until stop. wrap, when
// set, stands between the consumer and the real results publisher.
func (h *harness) start(cfg consumer.Config, wrap ...func(*results.ResultPublisher) consumer.ResultStore) (stop func()) {
	h.t.Helper()
	cfg.Node = "n1"
	res := newResults(h.t, h.js)
	var store consumer.ResultStore = res
	for _, w := range wrap {
		store = w(res)
	}
	pub, err := events.New(h.js, events.Config{Node: "n1"})
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := consumer.New(h.js, store, pub, h.sync, cfg)
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

// newResults returns the results publisher of node n1.
func newResults(t *testing.T, js jetstream.JetStream) *results.ResultPublisher {
	t.Helper()
	res, err := results.New(js, results.Config{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	return res
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

// settledResults returns every result stored once the consumer has settled:
// it publishes a sentinel intent and waits for its result first, so that a
// late duplicate of an earlier result is counted too. The sentinel's own
// result is left out.
func (h *harness) settledResults() []schemas.SyncResult {
	h.t.Helper()
	h.sentinels++
	uid := fmt.Sprintf("sentinel-%d", h.sentinels)
	seq := h.publish("jetlet.intent.n1."+uid, podIntent(uid, 1))
	var all []schemas.SyncResult
	var err error
	poll.Until(h.t, 60*time.Second, func() string { return fmt.Sprintf("the result of sentinel intent %d (%v)", seq, err) }, func() bool {
		all, err = jetlettest.ReadAll[schemas.SyncResult](h.js, schemas.StreamResults, "jetlet.result.>")
		return err == nil && slices.ContainsFunc(all, func(r schemas.SyncResult) bool { return r.IntentSeq == seq })
	})
	return slices.DeleteFunc(all, func(r schemas.SyncResult) bool { return strings.HasPrefix(r.UID, "sentinel-") })
}

// resultsOf counts the results per intent.
func resultsOf(results []schemas.SyncResult) map[uint64]int {
	n := map[uint64]int{}
	for _, r := range results {
		n[r.IntentSeq]++
	}
	return n
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

	h.results(uids * perUID)
	results := h.settledResults()
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
	for uid := range lastSeq {
		applied := h.sync.applied[uid]
		if got, want := applied[len(applied)-1], lastSeq[uid]; got != want {
			t.Errorf("uid %s last synced intent %d, want the newest, %d", uid, got, want)
		}
	}
}

func TestBadIntentsAreRejectedOrDeadLetteredAndOthersCarryOn(t *testing.T) {
	h := newHarness(t)
	h.start(consumer.Config{})

	privileged := `{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":7,"pod":{"metadata":{"name":"p","namespace":"default","uid":"priv"},
	  "spec":{"containers":[{"name":"app","image":"busybox","command":["true"],"securityContext":{"privileged":true,"allowPrivilegeEscalation":false}}]}}}`
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
		{"priv", privileged, "allowPrivilegeEscalation", "default", "p", 7},
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

// A poison intent (its subject names no pod uid) is dead-lettered and
// terminated at its first delivery: JetStream says so with a MSG_TERMINATED
// advisory. Handed back instead (Nak), it would be redelivered for ever while
// the dead letters' dedupe still stored it once.
func TestAPoisonIntentIsTerminatedAtItsFirstDelivery(t *testing.T) {
	h := newHarness(t)
	terminated, err := h.nc.SubscribeSync(server.JSAdvisoryConsumerMsgTerminatedPre + "." + schemas.StreamIntents + ".>")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	h.start(consumer.Config{})
	seq := h.publish("jetlet.intent.n1", podIntent("x", 1))
	msg, err := terminated.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("no MSG_TERMINATED advisory for poison intent %d: %v; it was not terminated", seq, err)
	}
	var adv server.JSConsumerDeliveryTerminatedAdvisory
	if err := json.Unmarshal(msg.Data, &adv); err != nil {
		t.Fatal(err)
	}
	if adv.StreamSeq != seq || adv.Deliveries != 1 || !strings.Contains(adv.Reason, "no valid pod uid") {
		t.Errorf("terminated intent %d after %d deliveries, reason %q; want intent %d after 1, naming no valid pod uid", adv.StreamSeq, adv.Deliveries, adv.Reason, seq)
	}
	if dead := readAll[json.RawMessage](t, h.js, schemas.StreamDead, "jetlet.dead.>", 1); len(dead) != 1 {
		t.Errorf("%d dead letters, want 1", len(dead))
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

func TestRecoveryHandsTheWholeDesiredStateOverBeforeAnySync(t *testing.T) {
	h := newHarness(t)
	seq := h.publish("jetlet.intent.n1.u1", podIntent("u1", 2))
	h.publish("jetlet.intent.n1.u1", podIntent("u1", 1)) // stale: not the desired state
	deleted := h.publish("jetlet.intent.n1.u2", podIntent("u2", 1))
	deleted = h.publish("jetlet.intent.n1.u2", []byte(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","op":"delete",
	  "pod":{"metadata":{"name":"p-u2","namespace":"default","uid":"u2"}}}`))
	h.publish("jetlet.intent.n1.u3", []byte(`{"not":"an intent"}`)) // never valid: no desired state
	h.start(consumer.Config{})
	results := h.settledResults()
	if got := resultsOf(results); len(got) != 5 {
		t.Errorf("results per intent %v, want one for each of the 5", got)
	}
	h.sync.mu.Lock()
	defer h.sync.mu.Unlock()
	if h.sync.early != 0 {
		t.Errorf("%d syncs before the desired state was handed over", h.sync.early)
	}
	want := map[string]uint64{"u1": seq, "u2": deleted}
	got := map[string]uint64{}
	for _, d := range h.sync.started {
		got[d.UID] = d.IntentSeq
	}
	if !maps.Equal(got, want) {
		t.Errorf("started with the intents %v, want %v", got, want)
	}
	if s := h.sync.applied["u1"]; len(s) == 0 || s[0] != seq {
		t.Errorf("u1 synced with %v, want the replayed intent %d first", s, seq)
	}
	stream, err := h.js.Stream(t.Context(), schemas.StreamIntents)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := stream.Info(t.Context()); err != nil || info.State.Consumers != 1 {
		t.Errorf("%s holds %d consumers after recovery (%v), want only the durable: each counts against the stream's limit", schemas.StreamIntents, info.State.Consumers, err)
	}
}

// flakyPublisher fails to store the result of one intent once.
type flakyPublisher struct {
	*results.ResultPublisher
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
	return f.ResultPublisher.PublishResult(ctx, r)
}

func TestAFailedResultIsRetriedAndOrderKept(t *testing.T) {
	h := newHarness(t)
	h.sync.gate = make(chan struct{})
	var pub *flakyPublisher
	h.start(consumer.Config{}, func(p *results.ResultPublisher) consumer.ResultStore {
		pub = &flakyPublisher{ResultPublisher: p}
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
	h.results(4)
	results := h.settledResults()
	for seq, n := range resultsOf(results) {
		if n != 1 {
			t.Errorf("intent %d has %d results, want 1", seq, n)
		}
	}
	for i := 1; i < len(results); i++ {
		if results[i].IntentSeq <= results[i-1].IntentSeq {
			t.Fatalf("results out of intent order: %d after %d", results[i].IntentSeq, results[i-1].IntentSeq)
		}
	}
	if results[0].IntentSeq != first {
		t.Errorf("first result is for intent %d, want the failed one, %d", results[0].IntentSeq, first)
	}
}

func TestRestartAnswersWhatWasNotAnsweredAndKeepsTheDesiredState(t *testing.T) {
	h := newHarness(t)
	stop := h.start(consumer.Config{})
	applied := h.publish("jetlet.intent.n1.u1", podIntent("u1", 1))
	h.results(1)
	stop()
	// While jetlet is away an invalid intent comes: at start-up it is
	// answered Rejected, and the pod's desired state stays intent 1, which
	// is not answered again.
	bad := h.publish("jetlet.intent.n1.u1", []byte(`{"not":"an intent"}`))
	h.start(consumer.Config{})
	results := h.settledResults()
	if got, want := resultsOf(results), map[uint64]int{applied: 1, bad: 1}; !maps.Equal(got, want) {
		t.Fatalf("results per intent %v, want %v", got, want)
	}
	if r := results[1]; r.Outcome != schemas.OutcomeRejected {
		t.Errorf("second intent: %s, want Rejected", r.Outcome)
	}
	h.sync.mu.Lock()
	defer h.sync.mu.Unlock()
	if len(h.sync.started) != 1 || h.sync.started[0].IntentSeq != applied {
		t.Errorf("started with %+v, want u1 at intent %d", h.sync.started, applied)
	}
}

// storedButFailingPublisher stores the result of one intent and then reports
// a failure, as when the PubAck is lost; it counts the results published.
type storedButFailingPublisher struct {
	*results.ResultPublisher
	mu        sync.Mutex
	failSeq   uint64
	published map[uint64]int
}

func (f *storedButFailingPublisher) PublishResult(ctx context.Context, r *schemas.SyncResult) error {
	err := f.ResultPublisher.PublishResult(ctx, r)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published[r.IntentSeq]++
	if err == nil && r.IntentSeq == f.failSeq {
		f.failSeq = 0
		return errors.New("injected: no acknowledgement")
	}
	return err
}

// A result stored whose acknowledgement was lost is published again, by
// the outbox's retry, and found stored: one result, the intent acked.
func TestAResultWhosePubAckWasLostIsStoredOnce(t *testing.T) {
	h := newHarness(t)
	h.sync.gate = make(chan struct{})
	pub := &storedButFailingPublisher{published: map[uint64]int{}}
	h.start(consumer.Config{}, func(p *results.ResultPublisher) consumer.ResultStore {
		pub.ResultPublisher = p
		return pub
	})
	seq := h.publish("jetlet.intent.n1.u1", podIntent("u1", 1))
	pub.mu.Lock()
	pub.failSeq = seq
	pub.mu.Unlock()
	close(h.sync.gate)
	if got := resultsOf(h.settledResults()); got[seq] != 1 || len(got) != 1 {
		t.Fatalf("results per intent %v, want one for intent %d", got, seq)
	}
	poll.Until(t, 30*time.Second, poll.Msg("the intent to be acked"), func() bool {
		info, err := h.js.Consumer(t.Context(), schemas.StreamIntents, natsjs.DurableName("n1"))
		return err == nil && info.CachedInfo().NumAckPending == 0 && info.CachedInfo().AckFloor.Stream >= seq
	})
	pub.mu.Lock()
	defer pub.mu.Unlock()
	if n := pub.published[seq]; n != 2 {
		t.Errorf("intent %d: its result published %d times, want twice (the second found it stored)", seq, n)
	}
}

// An intent whose first delivery is lost (as with a stream leader killed
// mid-burst) comes back only after AckWait, once a newer intent of its pod
// has been answered: it must get its own result, once, not be taken for
// answered because a newer one was.
func TestAnOlderIntentRedeliveredAfterANewerOneWasAnsweredGetsItsOwnResult(t *testing.T) {
	h := newHarness(t)
	cfg := consumer.Config{Node: "n1", AckWait: time.Second}
	probe, err := consumer.New(h.js, nil, nil, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	durable, err := h.js.CreateOrUpdateConsumer(t.Context(), schemas.StreamIntents, probe.ConsumerConfig())
	if err != nil {
		t.Fatal(err)
	}
	// A pull request waiting before jetlet's takes the next intent: its
	// delivery is the one lost.
	lost, err := durable.Fetch(1, jetstream.FetchMaxWait(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	h.start(cfg)
	older := h.publish("jetlet.intent.n1.u1", podIntent("u1", 1))
	m, ok := <-lost.Messages()
	if !ok {
		t.Fatalf("the intent was not delivered to the first pull request: %v", lost.Error())
	}
	if meta, _ := m.Metadata(); meta.Sequence.Stream != older {
		t.Fatalf("took intent %d, want %d", meta.Sequence.Stream, older)
	}
	newer := h.publish("jetlet.intent.n1.u1", podIntent("u1", 2))
	h.results(1)
	// The lost one comes back after AckWait and is answered.
	var results []schemas.SyncResult
	poll.Until(t, 30*time.Second, poll.Msg("a result for the redelivered intent"), func() bool {
		results = h.settledResults()
		return resultsOf(results)[older] > 0
	})
	if got, want := resultsOf(h.settledResults()), map[uint64]int{older: 1, newer: 1}; !maps.Equal(got, want) {
		t.Fatalf("results per intent %v, want %v", got, want)
	}
	for _, r := range results {
		switch {
		case r.IntentSeq == newer && r.Outcome != schemas.OutcomeSynced:
			t.Errorf("newer intent: %s, want Synced", r.Outcome)
		case r.IntentSeq == older && r.Outcome != schemas.OutcomeSuperseded && r.Outcome != schemas.OutcomeStale:
			t.Errorf("older intent: %s (%s), want Superseded or Stale", r.Outcome, r.Error)
		}
	}
	h.sync.mu.Lock()
	defer h.sync.mu.Unlock()
	if got := h.sync.applied["u1"]; !slices.Equal(got, []uint64{newer}) {
		t.Errorf("synced %v, want only the newer intent %d", got, newer)
	}
}

// A jetlet that stored an intent's result and died before acking it leaves
// the intent in the stream with its answer: the next one acks it when the
// durable consumer delivers it, without answering it again.
func TestAnIntentAnsweredButNotAckedBeforeARestartIsAckedWithoutAnother(t *testing.T) {
	h := newHarness(t)
	seq := h.publish("jetlet.intent.n1.u1", podIntent("u1", 1))
	if err := newResults(t, h.js).PublishResult(t.Context(), &schemas.SyncResult{Node: "n1", UID: "u1", IntentSeq: seq, Outcome: schemas.OutcomeSynced}); err != nil {
		t.Fatal(err)
	}
	h.start(consumer.Config{})
	poll.Until(t, 30*time.Second, poll.Msg("the answered intent to be acked"), func() bool {
		info, err := h.js.Consumer(t.Context(), schemas.StreamIntents, natsjs.DurableName("n1"))
		return err == nil && info.CachedInfo().NumAckPending == 0 && info.CachedInfo().AckFloor.Stream >= seq
	})
	if got := resultsOf(h.settledResults()); got[seq] != 1 || len(got) != 1 {
		t.Errorf("results per intent %v, want the one stored before the restart", got)
	}
	h.sync.mu.Lock()
	defer h.sync.mu.Unlock()
	if len(h.sync.applied["u1"]) != 0 {
		t.Errorf("synced %v: an answered intent is not applied again by the consumer", h.sync.applied["u1"])
	}
	if len(h.sync.started) != 1 || h.sync.started[0].IntentSeq != seq {
		t.Errorf("started with %+v, want u1 at intent %d", h.sync.started, seq)
	}
}

// stalledPublisher stores nothing until released, as a results stream
// electing a leader.
type stalledPublisher struct {
	*results.ResultPublisher
	released chan struct{}
}

func (s *stalledPublisher) PublishResult(ctx context.Context, r *schemas.SyncResult) error {
	select {
	case <-s.released:
		return s.ResultPublisher.PublishResult(ctx, r)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Syncs do not wait for results: while none can be stored, one worker
// still starts every new pod, and the results follow, in order and once
// each, when the stream takes writes again.
func TestPodsStartWhileResultsCannotBeStored(t *testing.T) {
	h := newHarness(t)
	pub := &stalledPublisher{released: make(chan struct{})}
	h.start(consumer.Config{Workers: 1}, func(p *results.ResultPublisher) consumer.ResultStore {
		pub.ResultPublisher = p
		return pub
	})
	const pods = 5
	synced := func(n int) func() bool {
		return func() bool {
			h.sync.mu.Lock()
			defer h.sync.mu.Unlock()
			got := 0
			for _, seqs := range h.sync.applied {
				got += len(seqs)
			}
			return got == n
		}
	}
	for i := range pods {
		uid := fmt.Sprintf("u%d", i)
		h.publish("jetlet.intent.n1."+uid, podIntent(uid, 1))
	}
	poll.Until(t, 30*time.Second, poll.Msg("every pod synced"), synced(pods))
	// The pod's next intent is applied behind its first result, still waiting.
	h.publish("jetlet.intent.n1.u0", podIntent("u0", 2))
	poll.Until(t, 30*time.Second, poll.Msg("u0 synced again"), synced(pods+1))
	if stored, err := jetlettest.ReadAll[schemas.SyncResult](h.js, schemas.StreamResults, "jetlet.result.>"); err != nil || len(stored) != 0 {
		t.Fatalf("%d results stored while stalled (%v)", len(stored), err)
	}
	close(pub.released)
	// Theirs first: the sentinel's, another pod's, may be stored before.
	h.results(pods + 1)
	got := h.settledResults()
	if n := resultsOf(got); len(n) != pods+1 {
		t.Errorf("results per intent %v, want one for each of %d", n, pods+1)
	}
	var u0 []int64
	for _, r := range got {
		if r.UID == "u0" {
			u0 = append(u0, r.Revision)
		}
	}
	if !slices.Equal(u0, []int64{1, 2}) {
		t.Errorf("u0's results are for revisions %v, want [1 2] in order", u0)
	}
}
