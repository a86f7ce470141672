package consumer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
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
	"go.opentelemetry.io/otel/trace"

	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/schemas"
)

var tracer = otel.Tracer("github.com/jetlet/jetlet/consumer")

// Consumer consumes one node's intents and runs its pod workers.
type Consumer struct {
	js   jetstream.JetStream
	pub  Publisher
	sync Syncer
	cfg  Config
	subj schemas.Subjects
	log  zerolog.Logger
	m    *metrics

	mu       sync.Mutex
	pods     map[string]*pod
	held     map[uint64]*delivery // every intent taken and not yet settled, by stream sequence
	queue    []*pod               // pods with work, each at most once
	queued   *sync.Cond
	draining bool

	attached atomic.Bool
}

// pod is one pod worker's state. The fields under "mu" are guarded by
// Consumer.mu; the rest belong to the worker that set busy.
type pod struct {
	uid string

	// mu
	pending []*delivery // intents waiting, in stream order
	busy    bool        // in the queue or being worked on
	wake    bool        // a sync is wanted even without a new intent

	desired    *Desired // written under mu, read by its worker without
	done       applied
	lastStatus *schemas.PodStatus // the last status stored, to skip storing it unchanged
	retry      *time.Timer
	span       trace.SpanContext // the applied intent's, for the syncs that follow it
	// blockedAt is the oldest intent handed back to JetStream after a failure:
	// newer intents of the pod wait for its redelivery, so that results stay
	// in intent order.
	blockedAt    uint64
	blockedSince time.Time
	// answered is the highest intent whose result is stored: a delivery at or
	// below it (a redelivery, or one answered at recovery before the durable
	// consumer got to it) is acked as it is.
	answered uint64
	// goneAt is when a delete finished; the entry stays a while as a
	// tombstone (answered, done) and is then swept.
	goneAt time.Time
}

// live reports whether the pod has a desired state still to keep: it is
// resynced, woken by the relist and counted. Call with Consumer.mu held, or
// from the pod's worker.
func (p *pod) live() bool { return p.desired != nil && p.goneAt.IsZero() }

// delivery is one intent, as delivered by the durable consumer or, for one
// recovered from the stream at start-up, as read back from it.
type delivery struct {
	msg        jetstream.Msg // nil until the durable consumer delivers it; guarded by Consumer.mu
	data       []byte
	header     nats.Header
	seq        uint64
	delivered  uint64
	receivedAt time.Time
}

func newDelivery(msg jetstream.Msg, meta *jetstream.MsgMetadata) *delivery {
	return &delivery{
		msg: msg, data: msg.Data(), header: msg.Headers(),
		seq: meta.Sequence.Stream, delivered: meta.NumDelivered, receivedAt: time.Now(),
	}
}

// New returns a Consumer; it does no I/O before Run.
func New(js jetstream.JetStream, pub Publisher, syncer Syncer, cfg Config) (*Consumer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Consumer{
		js:   js,
		pub:  pub,
		sync: syncer,
		cfg:  cfg,
		subj: schemas.Subjects{Prefix: cfg.SubjectPrefix},
		log:  cfg.Logger.With().Str("component", "consumer").Logger(),
		m:    newMetrics(cfg.Registerer),
		pods: map[string]*pod{},
		held: map[uint64]*delivery{},
	}
	c.queued = sync.NewCond(&c.mu)
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(podsCollector{c.PodCounts})
	}
	return c, nil
}

// Attached reports whether the durable consumer is attached (for /readyz).
func (c *Consumer) Attached() bool { return c.attached.Load() }

// DurableName is the durable consumer of a node.
func DurableName(node string) string { return "jetlet-" + node }

// Run recovers the desired state from the stream, reconciles every pod, then
// consumes intents until ctx is done. On return every intent it held is
// settled or handed back; in-flight syncs get drain to finish.
func (c *Consumer) Run(ctx context.Context, drain time.Duration) error {
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
				c.log.Warn().Dur("drain", drain).Msg("in-flight syncs did not finish in time; cancelling them")
				cancelSyncs()
			}
		}
		c.handBack()
	}
	// Failing to start because of SIGTERM is a clean stop, not an error.
	stopped := func(err error) error {
		stopWorkers()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}

	if err := c.recoverWithRetry(ctx); err != nil {
		return stopped(err)
	}
	cons, err := c.attach(ctx)
	if err != nil {
		return stopped(err)
	}
	cc, err := cons.Consume(c.receive, jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if !errors.Is(err, jetstream.ErrNoHeartbeat) && ctx.Err() == nil {
			c.log.Warn().Err(err).Msg("consume")
		}
	}))
	if err != nil {
		return stopped(fmt.Errorf("consume intents: %w", err))
	}
	c.attached.Store(true)
	c.log.Info().Str("durable", DurableName(c.cfg.Node)).Msg("consuming intents")

	keepAlive := time.NewTicker(c.cfg.AckWait / 3)
	defer keepAlive.Stop()
	resync := time.NewTimer(jitter(c.cfg.ResyncPeriod))
	defer resync.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-keepAlive.C:
			c.keepAlive()
			c.unblockLost()
		case <-resync.C:
			c.WakeAll()
			c.sweepTombstones()
			resync.Reset(jitter(c.cfg.ResyncPeriod))
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
		c.log.Warn().Err(err).Dur("retry_in", next).Msg("recovering the desired state failed; retrying")
	})
}

// tombstoneTTL is how long a deleted pod's last applied intent is
// remembered, so that a late intent for it is still answered Superseded or
// Stale rather than bringing it back.
const tombstoneTTL = time.Hour

// sweepTombstones forgets the pods deleted more than tombstoneTTL ago.
func (c *Consumer) sweepTombstones() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid, p := range c.pods {
		if !p.busy && len(p.pending) == 0 && !p.goneAt.IsZero() && time.Since(p.goneAt) > tombstoneTTL {
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

// jitter spreads a period over [p, 1.1p).
func jitter(p time.Duration) time.Duration { return p + rand.N(p/10+1) }

func (c *Consumer) attach(ctx context.Context) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		Durable:     DurableName(c.cfg.Node),
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
	cons, err := c.js.CreateOrUpdateConsumer(ctx, schemas.StreamIntents, cfg)
	if err != nil {
		return nil, fmt.Errorf("durable consumer %s: %w", cfg.Durable, err)
	}
	return cons, nil
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		_ = msg.Nak()
		return
	}
	if taken, dup := c.held[d.seq]; dup {
		// A redelivery of an intent already taken (waiting, being synced, or
		// recovered at start-up): settle it through the newest handle.
		taken.msg, taken.delivered = msg, d.delivered
		return
	}
	c.held[d.seq] = d
	p := c.podLocked(uid)
	p.pending = insertBySeq(p.pending, d)
	c.scheduleLocked(p)
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

// Wake asks for a sync of the pod even though no intent arrived (the relist
// saw it change). Pods without a desired state are ignored.
func (c *Consumer) Wake(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pods[uid]; ok && p.live() && !c.draining {
		p.wake = true
		c.scheduleLocked(p)
	}
}

// WakeAll asks for a sync of every pod with a desired state.
func (c *Consumer) WakeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pods {
		if p.live() && !c.draining {
			p.wake = true
			c.scheduleLocked(p)
		}
	}
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
		wake := p.wake
		p.wake = false
		if p.blockedAt != 0 {
			if !hasSeq(batch, p.blockedAt) {
				// Still waiting for the handed-back intent: keep these.
				p.pending, batch = batch, nil // already in order
			} else {
				p.blockedAt = 0
			}
		}
		c.mu.Unlock()

		synced := len(batch) > 0 && c.handleIntents(ctx, p, batch)
		if wake && !synced && p.live() {
			c.resyncPod(ctx, p)
		}

		c.mu.Lock()
		p.busy = false
		if p.wake || (len(p.pending) > 0 && (p.blockedAt == 0 || hasSeq(p.pending, p.blockedAt))) {
			c.scheduleLocked(p)
		} else if p.desired == nil && len(p.pending) == 0 && p.blockedAt == 0 {
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
// applied one after its sync, every other one at once. It reports whether
// the pod was synced.
func (c *Consumer) handleIntents(ctx context.Context, p *pod, batch []*delivery) (synced bool) {
	batch = c.dropAnswered(ctx, p, batch)
	cands := make([]candidate, len(batch))
	for i, d := range batch {
		in, err := schemas.DecodeIntent(d.data, schemas.IntentTarget{
			Node: c.cfg.Node, UID: p.uid, MaxBodyBytes: c.cfg.MaxIntentBytes, AllowPrivileged: c.cfg.AllowPrivileged,
		})
		cands[i] = candidate{seq: d.seq, intent: in, err: err}
	}
	verdicts, apply := decide(cands, p.done)
	verdictOf := make(map[uint64]verdict, len(verdicts))
	for _, v := range verdicts {
		verdictOf[v.seq] = v
	}
	for i, d := range batch {
		var ok bool
		if i == apply {
			ok, synced = c.apply(ctx, p, d, cands[i].intent), true
		} else {
			ok = c.answer(ctx, p, d, cands[i], verdictOf[d.seq])
		}
		if !ok {
			c.nakFrom(p, batch, i)
			return synced
		}
	}
	return synced
}

// dropAnswered acks the intents whose result is already stored: below the
// pod's answered mark, or, for a redelivery, below the pod's newest stored
// result (jetlet stopped between storing a result and acking its intent).
func (c *Consumer) dropAnswered(ctx context.Context, p *pod, batch []*delivery) []*delivery {
	answered := p.answered
	for _, d := range batch {
		if d.delivered > 1 && d.seq > answered {
			last, err := c.pub.LastResultSeq(ctx, p.uid)
			if err != nil {
				// The result stream's dedupe window still guards the common case.
				c.log.Warn().Err(err).Str("uid", p.uid).Msg("cannot read the last result; answering redelivered intents again")
			}
			answered = max(answered, last)
			break
		}
	}
	kept := batch[:0]
	for _, d := range batch {
		if d.seq <= answered {
			c.settle(d, func(m jetstream.Msg) error { return m.Ack() })
			continue
		}
		kept = append(kept, d)
	}
	return kept
}

// answer stores the result of an intent that is not applied and acks it.
func (c *Consumer) answer(ctx context.Context, p *pod, d *delivery, cand candidate, v verdict) bool {
	ctx, span := c.startSpan(ctx, d, p.uid)
	defer span.End()
	r := c.newResult(p.uid, d, cand.intent)
	r.Outcome, r.Error = v.outcome, v.reason
	if v.outcome == schemas.OutcomeRejected {
		c.emitRejected(ctx, p.uid, d, r)
	}
	return c.finish(ctx, p, d, r)
}

// apply syncs the pod to an accepted intent, stores the result and acks it.
func (c *Consumer) apply(ctx context.Context, p *pod, d *delivery, in *schemas.PodIntent) bool {
	ctx, span := c.startSpan(ctx, d, p.uid)
	defer span.End()
	if in.Op == schemas.OpDelete && p.desired != nil && p.desired.Intent.Op == schemas.OpApply {
		in = deleteOf(in, p.desired.Intent)
	}
	c.mu.Lock() // Wanted reads desired
	p.desired = &Desired{UID: p.uid, Intent: in, IntentSeq: d.seq, ReceivedAt: d.receivedAt}
	p.goneAt = time.Time{}
	c.mu.Unlock()
	p.done = applied{seq: d.seq, revision: max(p.done.revision, in.Revision)}
	p.span = span.SpanContext()

	rep := c.syncPod(ctx, p)
	r := c.newResult(p.uid, d, in)
	r.Actions, r.Status = rep.Actions, rep.Status
	r.Outcome = schemas.OutcomeSynced
	if rep.Err != nil {
		r.Outcome, r.Error = schemas.OutcomeFailed, rep.Err.Error()
	}
	return c.finish(ctx, p, d, r)
}

// resyncPod syncs the pod to its desired state again; no result is due.
func (c *Consumer) resyncPod(ctx context.Context, p *pod) {
	ctx = trace.ContextWithSpanContext(ctx, p.span)
	c.syncPod(ctx, p)
}

// syncPod runs one sync and arranges what comes after it: the status stored,
// a retry timer, forgetting a pod that is gone.
func (c *Consumer) syncPod(ctx context.Context, p *pod) Report {
	start := time.Now()
	rep := c.sync.Sync(ctx, *p.desired)
	c.m.syncDuration.Observe(time.Since(start).Seconds())
	if rep.Status != nil && !sameStatus(p.lastStatus, rep.Status) {
		c.pub.PutStatus(rep.Status)
		c.mu.Lock()
		p.lastStatus = rep.Status
		c.mu.Unlock()
	}
	if p.retry != nil {
		p.retry.Stop()
		p.retry = nil
	}
	if rep.RetryAfter > 0 {
		uid := p.uid
		p.retry = time.AfterFunc(rep.RetryAfter, func() { c.Wake(uid) })
	}
	if rep.Gone {
		c.mu.Lock()
		p.goneAt = time.Now()
		c.mu.Unlock()
	}
	return rep
}

// deleteOf is a delete intent to apply to a pod the node runs from applied:
// it kills with applied's spec (its containers, their grace) unless the
// delete says otherwise. The grace period is the delete's
// gracePeriodSeconds, else its pod's terminationGracePeriodSeconds, else the
// running pod's, else 30 s.
func deleteOf(del, applied *schemas.PodIntent) *schemas.PodIntent {
	merged := *del
	if merged.GracePeriodSeconds == nil && del.Pod != nil {
		merged.GracePeriodSeconds = del.Pod.Spec.TerminationGracePeriodSeconds
	}
	merged.Pod = applied.Pod
	return &merged
}

// sameStatus reports whether two statuses differ only in when they were
// observed.
func sameStatus(a, b *schemas.PodStatus) bool {
	if a == nil || b == nil {
		return false
	}
	x, y := *a, *b
	x.ObservedAt, y.ObservedAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(x, y)
}

// Wanted reports whether the pod is desired on the node: its last intent is
// an apply. Garbage collection removes the content of pods not wanted.
func (c *Consumer) Wanted(uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pods[uid]
	return ok && p.desired != nil && p.desired.Intent.Op != schemas.OpDelete
}

// PodCounts counts the pods with a desired state by the phase last stored.
func (c *Consumer) PodCounts() schemas.PodCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	counts := schemas.PodCounts{ByPhase: map[schemas.PodPhase]int{}}
	for _, p := range c.pods {
		if !p.live() || p.lastStatus == nil {
			continue
		}
		counts.Total++
		counts.ByPhase[p.lastStatus.Phase]++
	}
	return counts
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
	}
	return r
}

// finish stores the result and acks the intent; a failed store hands the
// intent back for redelivery with a growing delay.
func (c *Consumer) finish(ctx context.Context, p *pod, d *delivery, r *schemas.SyncResult) bool {
	r.FinishedAt = time.Now().UTC()
	if err := c.pub.PublishResult(ctx, r); err != nil {
		c.log.Warn().Err(err).Uint64("seq", d.seq).Msg("result not stored; the intent will be redelivered")
		return false
	}
	c.m.intents.WithLabelValues(string(r.Outcome)).Inc()
	c.mu.Lock()
	p.answered = max(p.answered, d.seq)
	c.mu.Unlock()
	c.settle(d, func(m jetstream.Msg) error { return m.Ack() })
	return true
}

// nakFrom hands batch[i:] back to JetStream, to be delivered again after a
// delay that grows with the number of deliveries; newer intents of the pod
// wait for them.
func (c *Consumer) nakFrom(p *pod, batch []*delivery, i int) {
	c.mu.Lock()
	p.blockedAt, p.blockedSince = batch[i].seq, time.Now()
	c.mu.Unlock()
	for _, d := range batch[i:] {
		c.m.naks.Inc()
		delay := redeliveryDelay(d.delivered)
		c.settle(d, func(m jetstream.Msg) error { return m.NakWithDelay(delay) })
	}
}

// redeliveryDelay grows with the deliveries so far: 500 ms doubling to 15 s.
func redeliveryDelay(delivered uint64) time.Duration {
	return min(time.Duration(1<<min(delivered, 6))*250*time.Millisecond, 15*time.Second)
}

// settle stops keeping d alive and settles it with fn. An intent recovered
// from the stream and not delivered again yet has nothing to settle: the
// durable consumer delivers it later and it is acked then as answered.
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
// subject and terminates it.
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
	c.pub.Emit(ctx, schemas.LifecycleEvent{
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
	ctx = events.ExtractTrace(ctx, d.header)
	return tracer.Start(ctx, "jetlet.intent "+uid, trace.WithSpanKind(trace.SpanKindConsumer))
}
