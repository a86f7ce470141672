package consumer

import (
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// podQueue is one pod's intake: the intents waiting for its worker, and
// what it applied (the record Superseded and Stale are decided from).
type podQueue struct {
	uid string

	// mu
	pending []*delivery // intents waiting, in stream order
	busy    bool        // in ready or being worked on
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
	// seenBefore: its sequence is at or below one taken earlier, so it may
	// be answered already, though this is its first delivery (a durable
	// consumer made anew after its server was lost).
	seenBefore bool

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

// noteDeliverySeqLocked follows the durable consumer's delivery sequence,
// which grows with every delivery, redeliveries included, as long as the
// consumer keeps its state. One that starts again lost it (kept in memory,
// its server restarted) and goes on to deliver every intent of the node
// again: superviseIntake makes it anew. It reports whether the consumer is
// taken to have forgotten.
func (c *Consumer) noteDeliverySeqLocked(deliverySeq, streamSeq uint64) bool {
	if deliverySeq <= c.lastDeliverySeq && c.durableForgot == nil {
		c.durableForgot = fmt.Errorf("its deliveries started again at %d (intent %d) after %d: it lost its state", deliverySeq, streamSeq, c.lastDeliverySeq)
		c.wakeSupervisor()
	}
	c.lastDeliverySeq = deliverySeq
	return c.durableForgot != nil
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
	c.mu.Lock()
	if c.noteDeliverySeqLocked(meta.Sequence.Consumer, d.seq) {
		// From a consumer that forgot, about to be made anew from the
		// node's first intent the stream keeps: it delivers this again.
		c.mu.Unlock()
		return
	}
	d.seenBefore = d.seq <= c.highestTaken
	c.highestTaken = max(c.highestTaken, d.seq)
	c.mu.Unlock()
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
	handBack                    // intake closed: for the next jetlet
	answeredBefore              // found answered at recovery
)

func (c *Consumer) take(uid string, d *delivery) taken {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.intakeClosed {
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
	p := c.podQueueLocked(uid)
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

// podQueueLocked returns the queue of pod uid, making it if it has none.
func (c *Consumer) podQueueLocked(uid string) *podQueue {
	p, ok := c.queues[uid]
	if !ok {
		p = &podQueue{uid: uid}
		c.queues[uid] = p
	}
	return p
}

// scheduleLocked puts p in ready for a worker unless it is there already or
// being worked on.
func (c *Consumer) scheduleLocked(p *podQueue) {
	if p.busy {
		return
	}
	p.busy = true
	c.ready = append(c.ready, p)
	c.readyCond.Signal()
}

// next waits for a pod queue in ready and takes its batch: every intent it
// has pending, unless it still waits for its handed-back intent. It reports
// false once the intake is closed.
func (c *Consumer) next() (*podQueue, []*delivery, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.ready) == 0 && !c.intakeClosed {
		c.readyCond.Wait()
	}
	if c.intakeClosed {
		return nil, nil, false
	}
	p := c.ready[0]
	c.ready[0] = nil
	c.ready = c.ready[1:]
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
	return p, batch, true
}

// release ends a worker's turn with p: it puts p in ready again if intents
// came meanwhile (and it is not waiting for a handed-back one), or forgets a
// queue that has nothing to remember.
func (c *Consumer) release(p *podQueue) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p.busy = false
	if len(p.pending) > 0 && (p.blockedAt == 0 || hasSeq(p.pending, p.blockedAt)) {
		c.scheduleLocked(p)
	} else if p.done.seq == 0 && len(p.pending) == 0 && p.blockedAt == 0 {
		// Never applied anything: nothing to remember (a redelivery of its
		// answered intents finds their results in the stream).
		delete(c.queues, p.uid)
		c.results.Forget(p.uid)
	}
}

// closeIntake makes every intent delivered from now on be handed back, and
// each worker stop once it has released the queue it holds.
func (c *Consumer) closeIntake() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.intakeClosed = true
	c.readyCond.Broadcast()
}

func hasSeq(batch []*delivery, seq uint64) bool {
	for _, d := range batch {
		if d.seq == seq {
			return true
		}
	}
	return false
}

// tombstoneTTL is how long a deleted pod's last applied intent is
// remembered, so that a late intent for it is still answered Superseded or
// Stale rather than bringing it back.
const tombstoneTTL = time.Hour

// sweepPeriod is how often tombstones older than tombstoneTTL are swept.
const sweepPeriod = time.Minute

// sweepTombstones forgets the pods deleted more than tombstoneTTL ago.
func (c *Consumer) sweepTombstones() {
	var swept []string
	c.mu.Lock()
	for uid, p := range c.queues {
		if !p.busy && len(p.pending) == 0 && p.blockedAt == 0 && !p.deletedAt.IsZero() && time.Since(p.deletedAt) > tombstoneTTL {
			delete(c.queues, uid)
			c.results.Forget(uid)
			swept = append(swept, uid)
		}
	}
	c.mu.Unlock()
	if c.cfg.Checkpoint == nil {
		return
	}
	for _, uid := range swept {
		if err := c.cfg.Checkpoint.Forget(uid); err != nil {
			c.log.Warn().Err(err).Str("uid", uid).Msg("deleted pod's checkpoint not removed")
		}
	}
}

// blockTimeout bounds how long a pod waits for an intent handed back to
// JetStream: one the stream discarded meanwhile (its per-pod history is
// bounded) is never redelivered.
func (c *Consumer) blockTimeout() time.Duration { return c.cfg.AckWait + 15*time.Second }

// unblockLost releases the pods whose handed-back intent did not come back.
func (c *Consumer) unblockLost() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.queues {
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
