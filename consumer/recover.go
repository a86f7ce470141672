package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// recover rebuilds every pod's desired state before any intent is consumed
// and hands it, complete, to the Syncer, so that a restarted jetlet adopts
// what runs (without restarting what still matches its intent) and kills
// what no intent wants any more.
//
// The desired state is what the workers would have reached: the intents the
// stream keeps for this node are replayed in order through the same
// decision as live ones (newest valid, not stale). Every kept intent above
// the durable consumer's ack floor whose result is not in the results
// stream has no answer yet: it is queued to be answered first, before any
// new intent, so that each pod's results stay in intent order even though
// the durable consumer would redeliver it only after its ack wait. The ones
// whose result is stored are acked when the durable consumer delivers them.
//
// Nothing of the consumer changes until every step has succeeded, so that a
// failed attempt can be retried from scratch.
func (c *Consumer) recover(ctx context.Context) error {
	start := time.Now()
	rec, replayed, err := c.replay(ctx)
	if err != nil {
		return fmt.Errorf("replay intents: %w", err)
	}
	floor, err := c.ackFloor(ctx)
	if err != nil {
		return err
	}
	var open []*delivery // kept intents the durable consumer may still deliver
	var since time.Time
	for _, ds := range rec.kept {
		for _, d := range ds {
			if d.seq > floor {
				open = append(open, d)
				if since.IsZero() || d.storedAt.Before(since) {
					since = d.storedAt
				}
			}
		}
	}
	stored := map[uint64]bool{}
	if len(open) > 0 {
		if stored, err = c.results.AnsweredSince(ctx, since.Add(-clockSkew)); err != nil {
			return fmt.Errorf("read the results of kept intents: %w", err)
		}
	}
	if err := c.handOver(ctx, rec.desired()); err != nil {
		return err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.queues = rec.queues
	unanswered := 0
	for uid, ds := range rec.kept {
		for _, d := range ds {
			c.highestTaken = max(c.highestTaken, d.seq)
			switch {
			case d.seq <= floor:
			case stored[d.seq]:
				c.answered[d.seq] = true
			default:
				d.receivedAt, d.verified = start, true
				c.held[d.seq] = d
				p := c.podQueueLocked(uid)
				p.pending = append(p.pending, d)
				c.scheduleLocked(p)
				unanswered++
			}
		}
	}
	c.log.Info().Int("intents", replayed).Int("unanswered", unanswered).Int("pods", len(rec.desiredOf)).Uint64("ack_floor", floor).
		Dur("took", time.Since(start)).Msg("desired state recovered")
	return nil
}

// recovered is what replaying the stream found.
type recovered struct {
	queues    map[string]*podQueue           // what each pod applied
	desiredOf map[string]*podworkers.Desired // each pod's last applied intent
	kept      map[string][]*delivery         // every intent kept, per pod, in stream order
}

func (r *recovered) desired() []podworkers.Desired {
	out := make([]podworkers.Desired, 0, len(r.desiredOf))
	for _, d := range r.desiredOf {
		out = append(out, *d)
	}
	return out
}

// ackFloor is the durable consumer's ack floor: every intent at or below it
// has been acked, so answered. 0 when the durable consumer does not exist.
func (c *Consumer) ackFloor(ctx context.Context) (uint64, error) {
	name := natsjs.DurableName(c.cfg.Node)
	var cons jetstream.Consumer
	err := natsjs.UnlessDenied(ctx, c.cfg.Denials, "$JS.API.CONSUMER.INFO."+c.cfg.IntentsStream+"."+name, func(ctx context.Context) (err error) {
		cons, err = c.js.Consumer(ctx, c.cfg.IntentsStream, name)
		return err
	})
	c.durableFound = nil
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return 0, nil
	}
	if errors.As(err, new(*natsjs.PermissionError)) {
		return 0, backoff.Permanent(fmt.Errorf("durable consumer %s: %w", name, err))
	}
	if err != nil && c.cfg.DurableInMemory {
		// Kept in memory on one server: waiting for a server that is gone
		// could be forever. The results say what is answered; attach
		// makes it anew.
		if gone := c.durableServerGone(ctx); gone != nil {
			c.log.Warn().Err(err).Str("durable", name).AnErr("lost", gone).Msg("durable consumer not answering; taken for lost with its server")
			c.remakeAtAttach = gone
			return 0, nil
		}
	}
	if err != nil {
		return 0, fmt.Errorf("durable consumer %s: %w", name, err)
	}
	c.durableFound = &cons.CachedInfo().Config
	c.noteDurableServer(cons.CachedInfo())
	return cons.CachedInfo().AckFloor.Stream, nil
}

// replay reads every intent kept for this node, oldest first, and decides
// as the workers would. It returns what it found and how many it read.
func (c *Consumer) replay(ctx context.Context) (*recovered, int, error) {
	rec := &recovered{queues: map[string]*podQueue{}, desiredOf: map[string]*podworkers.Desired{}, kept: map[string][]*delivery{}}
	stream, err := c.js.Stream(ctx, c.cfg.IntentsStream)
	if err != nil {
		return nil, 0, err
	}
	filter := c.subj.NodeIntents(c.cfg.Node)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return nil, 0, err
	}
	total := 0
	for _, n := range info.State.Subjects {
		total += int(n)
	}
	if total == 0 {
		return rec, 0, nil
	}
	// A consumer of a fixed name, not an ordered one, so that a node's
	// permissions can name it (docs/security.md).
	oc, err := natsjs.CreateReadBack(ctx, c.js, c.cfg.Denials, c.cfg.IntentsStream, jetstream.ConsumerConfig{
		Name: natsjs.ReplayName(c.cfg.Node), FilterSubject: filter, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if errors.As(err, new(*natsjs.PermissionError)) {
		return nil, 0, backoff.Permanent(err) // retrying cannot mend the permissions
	}
	if err != nil {
		return nil, 0, err
	}
	defer natsjs.DeleteReadBack(ctx, c.js, c.cfg.IntentsStream, natsjs.ReplayName(c.cfg.Node))
	read := 0
	for read < total {
		batch, err := oc.Fetch(min(total-read, 1000), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, read, err
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			read++
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			if uid, ok := c.subj.IntentUID(msg.Subject(), c.cfg.Node); ok {
				d := newDelivery(msg, meta)
				d.msg = nil // the replay consumer's handle acks nothing of the durable's
				rec.kept[uid] = append(rec.kept[uid], d)
				c.replayOne(rec, uid, d)
			}
		}
		if err := batch.Error(); err != nil {
			return nil, read, err
		}
		if got == 0 {
			break // trimmed meanwhile
		}
	}
	return rec, read, nil
}

func (c *Consumer) replayOne(rec *recovered, uid string, d *delivery) {
	in, err := c.Decode(uid, d.data)
	p, ok := rec.queues[uid]
	if !ok {
		p = &podQueue{uid: uid}
	}
	if _, apply := decide([]candidate{{seq: d.seq, intent: in, err: err}}, p.done); apply < 0 {
		return
	}
	rec.queues[uid] = p
	p.done = applied{seq: d.seq, revision: max(p.done.revision, in.Revision)}
	p.deletedAt = deletedAt(in)
	rec.desiredOf[uid] = &podworkers.Desired{UID: uid, Intent: in, IntentSeq: d.seq, ReceivedAt: d.receivedAt}
}
