package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/bus"
)

var tracer = otel.Tracer("github.com/jetlet/jetlet/consumer")

// Consumer consumes one node's intents and answers each one once.
//
// # Threading
//
// The consume callback (receive), the workers, the keep-alive ticker and
// recovery share the fields marked "mu"; each one is read and written with
// Consumer.mu held. A pod's decision state (pod.done) belongs to the worker
// that set pod.busy, and to recovery before any worker starts; busy is set
// and cleared under mu, which orders one owner after the next. Workers start
// only once recovery has finished.
//
// # An intent's life
//
// From the moment it is taken until it is answered or handed back, an
// intent is held: its delivery is in Consumer.held, and only the pod's
// worker settles it.
//
//	delivered by the durable consumer         recovered at start-up (above the ack
//	(not held yet)                            floor, no result in the results stream)
//	        │ result found (answered at recovery)            │
//	        ├──────────────▶ acked, no new result            │
//	        ▼                                                ▼
//	     pending ◀────────────────────────────────────────────┘
//	        │  held, in pod.pending in stream order
//	        │  (stays while the pod is blocked on an older intent)
//	        ▼  a worker takes the pod's batch
//	     in sync ── redelivered and its result found stored ──▶ answered
//	        │  decided: applied (Sync), Superseded, Stale or Rejected
//	        ├── result stored ───▶ answered: acked, no longer held
//	        └── not stored ──────▶ blocked: NAKed with a growing delay, no
//	                                longer held; the pod's newer intents
//	                                stay pending
//	blocked ── redelivered, or not within blockTimeout ──▶ pending
//
// How each state is left: pending, when a worker takes the pod (or, on
// shutdown, NAKed for the next jetlet); in sync, when its answer is stored
// or not; answered is final; blocked, when JetStream delivers the intent
// again or blockTimeout passes. A delivery of an intent already held only
// replaces the handle to settle it with. Whether an intent has its result
// is read from the results stream, never inferred from the order of
// sequences.
//
// A pod's record (what it applied, for Superseded and Stale) lives while it
// has intents or has applied one. Once its last applied intent is a delete
// it is tombstoned, and forgotten tombstoneTTL later; a newer apply brings
// it back.
type Consumer struct {
	js      jetstream.JetStream
	results ResultStore
	emit    EventEmitter
	sync    Syncer
	cfg     Config
	subj    schemas.Subjects
	log     zerolog.Logger
	m       *metrics

	mu       sync.Mutex
	pods     map[string]*pod      // mu
	held     map[uint64]*delivery // mu: every intent taken and not yet settled, by stream sequence
	queue    []*pod               // mu: pods with work, each at most once
	queued   *sync.Cond
	draining bool // mu
	// answered holds the intents found answered at recovery that the
	// durable consumer may still deliver (above its ack floor); mu.
	answered map[uint64]bool

	attached atomic.Bool
}

// pod is one pod's intake state.
type pod struct {
	uid string

	// mu
	pending []*delivery // intents waiting, in stream order
	busy    bool        // in the queue or being worked on
	// blockedAt is the oldest intent handed back to JetStream after a failure:
	// newer intents of the pod wait for its redelivery, so that results stay
	// in intent order.
	blockedAt    uint64
	blockedSince time.Time
	// deletedAt is when the last intent applied became a delete: the record
	// is then a tombstone, swept tombstoneTTL later.
	deletedAt time.Time

	done applied // the worker that set busy
}

// delivery is one intent, as delivered by the durable consumer or, for one
// recovered from the stream at start-up, as read back from it.
type delivery struct {
	data       []byte
	header     nats.Header
	seq        uint64
	storedAt   time.Time // when the stream stored it: no result predates it
	receivedAt time.Time
	// verified: its result was looked for and not found (at recovery).
	verified bool

	// mu: the handle to settle it with and its delivery count, replaced when
	// the durable consumer delivers it again while held. msg is nil for a
	// recovered intent not delivered yet.
	msg       jetstream.Msg
	delivered uint64
}

func newDelivery(msg jetstream.Msg, meta *jetstream.MsgMetadata) *delivery {
	return &delivery{
		msg: msg, data: msg.Data(), header: msg.Headers(),
		seq: meta.Sequence.Stream, delivered: meta.NumDelivered, storedAt: meta.Timestamp, receivedAt: time.Now(),
	}
}

// New returns a Consumer answering intents through results and emitting
// its events through emit; it does no I/O before Run.
func New(js jetstream.JetStream, results ResultStore, emit EventEmitter, syncer Syncer, cfg Config) (*Consumer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Consumer{
		js:       js,
		results:  results,
		emit:     emit,
		sync:     syncer,
		cfg:      cfg,
		subj:     schemas.Subjects{Prefix: cfg.SubjectPrefix},
		log:      cfg.Logger.With().Str("component", "consumer").Logger(),
		m:        newMetrics(cfg.Registerer),
		pods:     map[string]*pod{},
		held:     map[uint64]*delivery{},
		answered: map[uint64]bool{},
	}
	c.queued = sync.NewCond(&c.mu)
	return c, nil
}

// Attached reports whether the durable consumer is attached (for /readyz).
func (c *Consumer) Attached() bool { return c.attached.Load() }

// Run recovers the desired state from the stream and hands it to the
// Syncer, then starts the workers and consumes intents until ctx is done.
// On return every intent it held is settled or handed back; in-flight syncs
// get drain to finish.
func (c *Consumer) Run(ctx context.Context, drain time.Duration) error {
	if err := c.recoverWithRetry(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // SIGTERM before recovery finished: a clean stop
		}
		return err
	}

	// Syncs outlive ctx by up to drain, so that SIGTERM lets them finish.
	syncCtx, cancelSyncs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelSyncs()
	var workers sync.WaitGroup
	for range c.cfg.Workers {
		workers.Go(func() { c.work(syncCtx) })
	}
	stopWorkers := func() {
		c.mu.Lock()
		c.draining = true
		c.queued.Broadcast()
		c.mu.Unlock()
		done := make(chan struct{})
		go func() { workers.Wait(); close(done) }()
		// Syncs still running keep their intents alive while they drain.
		keepAlive := time.NewTicker(c.cfg.AckWait / 3)
		defer keepAlive.Stop()
		deadline := time.NewTimer(drain)
		defer deadline.Stop()
		for finished := false; !finished; {
			select {
			case <-done:
				finished = true
			case <-keepAlive.C:
				c.keepAlive()
			case <-deadline.C:
				c.log.Warn().Dur("drain_ms", drain).Msg("in-flight syncs did not finish in time; cancelling them")
				cancelSyncs()
			}
		}
		c.handBack()
	}

	cons, err := c.attach(ctx)
	if err != nil {
		stopWorkers()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	cc, err := cons.Consume(c.receive, jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if !errors.Is(err, jetstream.ErrNoHeartbeat) && ctx.Err() == nil {
			c.log.Warn().Err(err).Msg("consume")
		}
	}))
	if err != nil {
		stopWorkers()
		return fmt.Errorf("consume intents: %w", err)
	}
	c.attached.Store(true)
	c.log.Info().Str("durable", bus.DurableName(c.cfg.Node)).Msg("consuming intents")

	keepAlive := time.NewTicker(c.cfg.AckWait / 3)
	defer keepAlive.Stop()
	sweep := time.NewTicker(sweepPeriod)
	defer sweep.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-keepAlive.C:
			c.keepAlive()
			c.unblockLost()
		case <-sweep.C:
			c.sweepTombstones()
		}
	}
	c.attached.Store(false)
	cc.Stop()
	<-cc.Closed()
	stopWorkers()
	return nil
}

// recoverWithRetry recovers, retrying with back-off while NATS or the
// runtime fail, until ctx is done.
func (c *Consumer) recoverWithRetry(ctx context.Context) error {
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0), backoff.WithMaxInterval(10*time.Second)), ctx)
	return backoff.RetryNotify(func() error { return c.recover(ctx) }, b, func(err error, next time.Duration) {
		c.log.Warn().Err(err).Dur("retry_in_ms", next).Msg("recovering the desired state failed; retrying")
	})
}

// tombstoneTTL is how long a deleted pod's last applied intent is
// remembered, so that a late intent for it is still answered Superseded or
// Stale rather than bringing it back.
const tombstoneTTL = time.Hour

// sweepPeriod is how often tombstones older than tombstoneTTL are swept.
const sweepPeriod = time.Minute

// sweepTombstones forgets the pods deleted more than tombstoneTTL ago.
func (c *Consumer) sweepTombstones() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, p := range c.pods {
		if !p.busy && len(p.pending) == 0 && p.blockedAt == 0 && !p.deletedAt.IsZero() && time.Since(p.deletedAt) > tombstoneTTL {
			delete(c.pods, uid)
		}
	}
}

// A pull request lives with the consumer's leader: when that server dies the
// request dies with it and nothing tells jetlet. Heartbeats every second let
// nats.go notice after two missed ones and pull again from the new leader,
// rather than after 30 s with its defaults.
const (
	pullHeartbeat = time.Second
	pullExpiry    = 10 * time.Second
)

// blockTimeout bounds how long a pod waits for an intent handed back to
// JetStream: one the stream discarded meanwhile (its per-pod history is
// bounded) is never redelivered.
func (c *Consumer) blockTimeout() time.Duration { return c.cfg.AckWait + 15*time.Second }

// unblockLost releases the pods whose handed-back intent did not come back.
func (c *Consumer) unblockLost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pods {
		if p.blockedAt != 0 && time.Since(p.blockedSince) > c.blockTimeout() {
			c.log.Warn().Str("uid", p.uid).Uint64("seq", p.blockedAt).
				Msg("a handed-back intent was not redelivered (discarded by the stream's history limit?); going on without it")
			p.blockedAt = 0
			if len(p.pending) > 0 {
				c.scheduleLocked(p)
			}
		}
	}
}

// consumerConfig is the node's durable consumer.
func (c *Consumer) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:     bus.DurableName(c.cfg.Node),
		Description: "jetlet intents for node " + c.cfg.Node,
		// The bare node subject too: an intent with no uid token must be seen
		// to be dead-lettered.
		FilterSubjects: []string{c.subj.Prefix + ".intent." + c.cfg.Node, c.subj.NodeIntents(c.cfg.Node)},
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        c.cfg.AckWait,
		MaxAckPending:  c.cfg.MaxAckPending,
		MaxDeliver:     -1,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	}
}

func (c *Consumer) attach(ctx context.Context) (jetstream.Consumer, error) {
	cfg := c.consumerConfig()
	create := "$JS.API.CONSUMER.CREATE." + schemas.StreamIntents + "." + cfg.Durable
	cons, err := c.createDurable(ctx, create, cfg)
	var denied *bus.PermissionError
	if errors.As(err, &denied) && denied.Subject == create {
		// Permissions that keep a node to its own intents allow the create
		// request only with the filter in its subject, which holds one
		// filter; they let no scheduler publish to the bare node subject.
		c.log.Info().Str("denied", denied.Subject).Str("filter", c.subj.NodeIntents(c.cfg.Node)).
			Msg("NATS permissions allow only the filtered create of the durable consumer; intents on the bare node subject are not watched")
		cfg.FilterSubjects, cfg.FilterSubject = nil, c.subj.NodeIntents(c.cfg.Node)
		cons, err = c.createDurable(ctx, create, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("durable consumer %s: %w", cfg.Durable, err)
	}
	return cons, nil
}

// createDurable creates or updates the durable consumer; a create request
// NATS denies (subject begins with create) fails at once with the
// *bus.PermissionError.
func (c *Consumer) createDurable(ctx context.Context, create string, cfg jetstream.ConsumerConfig) (cons jetstream.Consumer, err error) {
	err = bus.UnlessDenied(ctx, c.cfg.Denials, create, func(ctx context.Context) error {
		cons, err = c.js.CreateOrUpdateConsumer(ctx, schemas.StreamIntents, cfg)
		return err
	})
	return cons, err
}

// receive dispatches one delivered intent to its pod's worker. It runs on the
// consume goroutine and never blocks on a sync.
func (c *Consumer) receive(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		c.log.Error().Err(err).Str("subject", msg.Subject()).Msg("intent without JetStream metadata")
		return
	}
	d := newDelivery(msg, meta)
	uid, ok := c.subj.IntentUID(msg.Subject(), c.cfg.Node)
	if !ok {
		c.deadLetter(d, fmt.Sprintf("subject %q has no valid pod uid token (want %s)", msg.Subject(), c.subj.Intent(c.cfg.Node, "<uid>")))
		return
	}
	switch c.take(uid, d) {
	case handBack:
		_ = msg.Nak()
	case answeredBefore:
		_ = msg.Ack()
	}
}

type taken int

const (
	queued         taken = iota // pending for its pod's worker, or already held
	handBack                    // draining: for the next jetlet
	answeredBefore              // found answered at recovery
)

func (c *Consumer) take(uid string, d *delivery) taken {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return handBack
	}
	if held, dup := c.held[d.seq]; dup {
		// A redelivery of an intent already taken (waiting, being synced, or
		// recovered at start-up): settle it through the newest handle.
		held.msg, held.delivered = d.msg, d.delivered
		return queued
	}
	if c.answered[d.seq] {
		delete(c.answered, d.seq)
		return answeredBefore
	}
	c.held[d.seq] = d
	p := c.podLocked(uid)
	p.pending = insertBySeq(p.pending, d)
	c.scheduleLocked(p)
	return queued
}

// insertBySeq keeps a pod's waiting intents in stream order: a redelivered
// intent can arrive after newer ones.
func insertBySeq(pending []*delivery, d *delivery) []*delivery {
	i := len(pending)
	for i > 0 && pending[i-1].seq > d.seq {
		i--
	}
	return slices.Insert(pending, i, d)
}

func (c *Consumer) podLocked(uid string) *pod {
	p, ok := c.pods[uid]
	if !ok {
		p = &pod{uid: uid}
		c.pods[uid] = p
	}
	return p
}

// scheduleLocked queues p for a worker unless it is already queued or busy.
func (c *Consumer) scheduleLocked(p *pod) {
	if p.busy {
		return
	}
	p.busy = true
	c.queue = append(c.queue, p)
	c.queued.Signal()
}

// work is one worker: it takes pods off the queue until draining.
func (c *Consumer) work(ctx context.Context) {
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.draining {
			c.queued.Wait()
		}
		if c.draining {
			c.mu.Unlock()
			return
		}
		p := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		batch := p.pending
		p.pending = nil
		if p.blockedAt != 0 {
			if !hasSeq(batch, p.blockedAt) {
				// Still waiting for the handed-back intent: keep these.
				p.pending, batch = batch, nil // already in order
			} else {
				p.blockedAt = 0
			}
		}
		c.mu.Unlock()

		if len(batch) > 0 {
			c.handleIntents(ctx, p, batch)
		}

		c.mu.Lock()
		p.busy = false
		if len(p.pending) > 0 && (p.blockedAt == 0 || hasSeq(p.pending, p.blockedAt)) {
			c.scheduleLocked(p)
		} else if p.done.seq == 0 && len(p.pending) == 0 && p.blockedAt == 0 {
			// Never applied anything: nothing to remember (a redelivery of its
			// answered intents finds their results in the stream).
			delete(c.pods, p.uid)
		}
		c.mu.Unlock()
	}
}

func hasSeq(batch []*delivery, seq uint64) bool {
	for _, d := range batch {
		if d.seq == seq {
			return true
		}
	}
	return false
}

// handleIntents answers a batch of intents for one pod in stream order: the
// applied one after its sync, every other one at once.
func (c *Consumer) handleIntents(ctx context.Context, p *pod, batch []*delivery) {
	batch, ok := c.dropAnswered(ctx, p, batch)
	if !ok {
		return
	}
	// One trace per intent, under the scheduler's traceparent: the intent's
	// span, then decode, sync (a span per CRI call under it) and the
	// result's publish.
	cands := make([]candidate, len(batch))
	ctxs := make([]context.Context, len(batch))
	for i, d := range batch {
		var span trace.Span
		ctxs[i], span = c.startSpan(ctx, d, p.uid)
		defer span.End()
		cands[i] = c.decode(ctxs[i], p.uid, d)
	}
	verdicts, apply := decide(cands, p.done)
	verdictOf := make(map[uint64]verdict, len(verdicts))
	for _, v := range verdicts {
		verdictOf[v.seq] = v
	}
	for i, d := range batch {
		var ok bool
		if i == apply {
			ok = c.apply(ctxs[i], p, d, cands[i].intent)
		} else {
			ok = c.answer(ctxs[i], p, d, cands[i], verdictOf[d.seq])
		}
		if !ok {
			c.nakFrom(ctx, p, batch, i)
			return
		}
	}
}

// clockSkew is how much earlier than its intent a result may be stamped:
// the intents and results streams may have their leaders on different
// servers, whose clocks differ.
const clockSkew = time.Minute

// dropAnswered acks, without a new result, the redelivered intents whose
// result is stored (jetlet stored it and then lost the ack, or stopped
// before acking). It reports false when it could not tell, having handed
// the batch back.
func (c *Consumer) dropAnswered(ctx context.Context, p *pod, batch []*delivery) ([]*delivery, bool) {
	var since time.Time
	check := false
	c.mu.Lock()
	for _, d := range batch {
		if d.delivered > 1 && !d.verified {
			if !check || d.storedAt.Before(since) {
				since = d.storedAt
			}
			check = true
		}
	}
	c.mu.Unlock()
	if !check {
		return batch, true
	}
	stored, err := c.results.ResultsStored(ctx, p.uid, since.Add(-clockSkew))
	if err != nil {
		c.log.Warn().Err(err).Str("uid", p.uid).Msg("cannot tell whether redelivered intents have their results; handing them back")
		c.nakFrom(ctx, p, batch, 0)
		return nil, false
	}
	kept := batch[:0]
	for _, d := range batch {
		if stored[d.seq] {
			c.settle(d, func(m jetstream.Msg) error { return m.Ack() })
			continue
		}
		kept = append(kept, d)
	}
	return kept, true
}

// decode decodes and validates an intent, in a span of its own.
func (c *Consumer) decode(ctx context.Context, uid string, d *delivery) candidate {
	_, span := tracer.Start(ctx, "decode")
	defer span.End()
	in, err := schemas.DecodeIntent(d.data, schemas.IntentTarget{
		Node: c.cfg.Node, UID: uid, MaxBodyBytes: c.cfg.MaxIntentBytes, AllowPrivileged: c.cfg.AllowPrivileged,
		NoMemoryEmptyDir: c.cfg.NoMemoryEmptyDir,
	})
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return candidate{seq: d.seq, intent: in, err: err}
}

// answer stores the result of an intent that is not applied and acks it.
func (c *Consumer) answer(ctx context.Context, p *pod, d *delivery, cand candidate, v verdict) bool {
	r := c.newResult(p.uid, d, cand.intent)
	r.Outcome, r.Error = v.outcome, v.reason
	if v.outcome == schemas.OutcomeRejected {
		c.emitRejected(ctx, p.uid, d, r)
	}
	return c.finish(ctx, d, r, trace.SpanContextFromContext(ctx))
}

// apply syncs the pod to an accepted intent, stores the result and acks it.
func (c *Consumer) apply(ctx context.Context, p *pod, d *delivery, in *schemas.PodIntent) bool {
	p.done = applied{seq: d.seq, revision: max(p.done.revision, in.Revision)}
	c.mu.Lock()
	p.deletedAt = deletedAt(in)
	c.mu.Unlock()

	syncCtx, span := tracer.Start(ctx, "sync")
	rep := c.sync.Sync(syncCtx, podworkers.Desired{UID: p.uid, Intent: in, IntentSeq: d.seq, ReceivedAt: d.receivedAt})
	if rep.Err != nil {
		span.SetStatus(codes.Error, rep.Err.Error())
	}
	span.End()
	r := c.newResult(p.uid, d, in)
	r.Actions, r.Status = rep.Actions, rep.Status
	r.Outcome = schemas.OutcomeSynced
	if rep.Err != nil {
		r.Outcome, r.Error = schemas.OutcomeFailed, rep.Err.Error()
	}
	return c.finish(ctx, d, r, span.SpanContext())
}

// deletedAt is now for a delete, zero for an apply.
func deletedAt(in *schemas.PodIntent) time.Time {
	if in.Op == schemas.OpDelete {
		return time.Now()
	}
	return time.Time{}
}

func (c *Consumer) newResult(uid string, d *delivery, in *schemas.PodIntent) *schemas.SyncResult {
	r := &schemas.SyncResult{
		Node:       c.cfg.Node,
		UID:        uid,
		IntentSeq:  d.seq,
		Op:         schemas.OpApply,
		Actions:    []schemas.ActionResult{},
		ReceivedAt: d.receivedAt.UTC(),
	}
	if in != nil {
		r.Op, r.Revision = in.Op, in.Revision
		if in.Pod != nil {
			r.Namespace, r.Name = in.Pod.Namespace, in.Pod.Name
		}
	} else if env := schemas.PeekEnvelope(d.data); env.UID == uid {
		// Refused: say what can be read of it, unless it names another pod.
		r.Op, r.Revision, r.Namespace, r.Name = env.Op, env.Revision, env.Namespace, env.Name
	}
	return r
}

// finish stores the result, whose traceparent is from (the sync's span, or
// the intent's when there was no sync), and acks the intent; a failed store
// hands the intent back for redelivery with a growing delay.
func (c *Consumer) finish(ctx context.Context, d *delivery, r *schemas.SyncResult, from trace.SpanContext) bool {
	r.FinishedAt = time.Now().UTC()
	ctx, span := tracer.Start(ctx, "publish result")
	defer span.End()
	if err := c.results.PublishResult(trace.ContextWithSpanContext(ctx, from), r); err != nil {
		span.SetStatus(codes.Error, err.Error())
		c.log.Warn().Err(err).Uint64("seq", d.seq).Msg("result not stored; the intent will be redelivered")
		return false
	}
	c.m.intents.WithLabelValues(string(r.Outcome)).Inc()
	c.settle(d, func(m jetstream.Msg) error { return m.Ack() })
	return true
}

// nakFrom hands batch[i] back to JetStream, to be delivered again after a
// delay that grows with the number of deliveries, and keeps the newer
// batch[i+1:] held and pending: the pod waits for batch[i] to come back and
// then answers them all in stream order. (Handing those back too would let
// them come back in any order, and an older one be answered after a newer.)
// Called by the pod's worker.
func (c *Consumer) nakFrom(ctx context.Context, p *pod, batch []*delivery, i int) {
	c.mu.Lock()
	p.blockedAt, p.blockedSince = batch[i].seq, time.Now()
	delay := redeliveryDelay(batch[i].delivered)
	for _, d := range batch[i+1:] {
		p.pending = insertBySeq(p.pending, d)
	}
	c.mu.Unlock()
	c.m.naks.Inc()
	c.settle(batch[i], func(m jetstream.Msg) error { return c.nakConfirmed(ctx, m, delay) })
}

// nakConfirmed hands m back with delay and waits until JetStream confirms
// it, trying again while the consumer has no leader. A NAK is a bare
// publish: one sent as the consumer's leader dies, or while JetStream elects
// the next, is lost, and the pod waits the whole ack wait for the
// redelivery that it would have had after delay. Past the ack wait JetStream
// redelivers anyway.
func (c *Consumer) nakConfirmed(ctx context.Context, m jetstream.Msg, delay time.Duration) error {
	body := fmt.Appendf(nil, `-NAK {"delay": %d}`, delay.Nanoseconds())
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(c.cfg.AckWait)), ctx)
	return backoff.Retry(func() error {
		_, err := c.js.Conn().Request(m.Reply(), body, nakReplyTimeout)
		return err
	}, b)
}

// nakReplyTimeout bounds the wait for JetStream's confirmation of a NAK.
const nakReplyTimeout = time.Second

// redeliveryDelay grows with the deliveries so far: 500 ms doubling to 15 s.
func redeliveryDelay(delivered uint64) time.Duration {
	return min(time.Duration(1<<min(delivered, 6))*250*time.Millisecond, 15*time.Second)
}

// settle stops keeping d alive and settles it with fn. An intent recovered
// from the stream and not delivered again yet has nothing to settle: when
// the durable consumer delivers it, its result is found stored.
func (c *Consumer) settle(d *delivery, fn func(jetstream.Msg) error) {
	c.mu.Lock()
	delete(c.held, d.seq)
	msg := d.msg
	c.mu.Unlock()
	if msg == nil {
		return
	}
	if err := fn(msg); err != nil {
		c.log.Debug().Err(err).Uint64("seq", d.seq).Msg("settling an intent failed; JetStream will redeliver it")
	}
}

// keepAlive tells JetStream that every intent still held is being worked on.
func (c *Consumer) keepAlive() {
	for _, m := range c.heldMsgs() {
		_ = m.InProgress()
	}
}

// heldMsgs returns the handles of the intents held.
func (c *Consumer) heldMsgs() []jetstream.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	msgs := make([]jetstream.Msg, 0, len(c.held))
	for _, d := range c.held {
		if d.msg != nil {
			msgs = append(msgs, d.msg)
		}
	}
	return msgs
}

// handBack returns every intent not yet answered to JetStream at once, for the
// next jetlet to take.
func (c *Consumer) handBack() {
	msgs := c.heldMsgs()
	c.mu.Lock()
	c.held = map[uint64]*delivery{}
	c.mu.Unlock()
	for _, m := range msgs {
		_ = m.Nak()
	}
	if len(msgs) > 0 {
		c.log.Info().Int("intents", len(msgs)).Msg("handed unanswered intents back to JetStream")
	}
}

// deadLetter copies an intent no pod can be read from to the dead-letter
// subject and terminates it. d has just been delivered: only the consume
// goroutine knows it.
func (c *Consumer) deadLetter(d *delivery, reason string) {
	out := nats.NewMsg(c.subj.Dead(c.cfg.Node))
	out.Data = d.data
	for k, v := range d.header {
		// JetStream control headers (expected sequence, TTL, rollup, ...) were
		// meant for the intent's own publish and would fail this one.
		if !strings.HasPrefix(strings.ToLower(k), "nats-") {
			out.Header[k] = v
		}
	}
	out.Header.Set(schemas.HeaderError, reason)
	out.Header.Set("Jetlet-Subject", d.msg.Subject())
	out.Header.Set(schemas.HeaderIntentSeq, strconv.FormatUint(d.seq, 10))
	out.Header.Set(jetstream.MsgIDHeader, "dead."+c.cfg.Node+"."+strconv.FormatUint(d.seq, 10))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.js.PublishMsg(ctx, out); err != nil {
		c.log.Warn().Err(err).Uint64("seq", d.seq).Msg("dead letter not stored; the intent will be redelivered")
		_ = d.msg.NakWithDelay(redeliveryDelay(d.delivered))
		return
	}
	c.m.deadLetters.Inc()
	c.log.Warn().Str("subject", d.msg.Subject()).Uint64("seq", d.seq).Str("reason", reason).Msg("intent dead-lettered")
	_ = d.msg.TermWithReason(reason)
}

func (c *Consumer) emitRejected(ctx context.Context, uid string, d *delivery, r *schemas.SyncResult) {
	c.emit.Emit(ctx, schemas.LifecycleEvent{
		ID:        "intent." + c.cfg.Node + "." + strconv.FormatUint(d.seq, 10) + ".rejected",
		Type:      schemas.EventIntentRejected,
		UID:       uid,
		Namespace: r.Namespace,
		Pod:       r.Name,
		Reason:    "Rejected",
		Message:   r.Error,
		Time:      time.Now().UTC(),
		IntentSeq: d.seq,
		Revision:  r.Revision,
	})
}

func (c *Consumer) startSpan(ctx context.Context, d *delivery, uid string) (context.Context, trace.Span) {
	ctx = bus.ExtractTrace(ctx, d.header)
	return tracer.Start(ctx, "jetlet.intent "+uid, trace.WithSpanKind(trace.SpanKindConsumer))
}
