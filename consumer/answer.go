package consumer

import (
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// handleIntents answers a batch of intents for one pod in stream order: the
// applied one after its sync, every other one at once.
func (c *Consumer) handleIntents(ctx context.Context, p *podQueue, batch []*delivery) {
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
		if i == apply {
			c.apply(ctxs[i], p, d, cands[i].intent)
		} else {
			c.answer(ctxs[i], p, d, cands[i], verdictOf[d.seq])
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
func (c *Consumer) dropAnswered(ctx context.Context, p *podQueue, batch []*delivery) ([]*delivery, bool) {
	check := false
	c.mu.Lock()
	for _, d := range batch {
		check = check || (d.delivered > 1 || d.seenBefore) && !d.verified
	}
	c.mu.Unlock()
	if !check {
		return batch, true
	}
	stored, err := c.results.PodAnswered(ctx, p.uid)
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
	in, err := c.Decode(uid, d.data)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	return candidate{seq: d.seq, intent: in, err: err}
}

// Decode decodes and validates the body of an intent for pod uid as the
// node does: an error is the Rejected result's.
func (c *Consumer) Decode(uid string, data []byte) (*schemas.PodIntent, error) {
	return schemas.DecodeIntent(data, schemas.IntentTarget{
		Node: c.cfg.Node, UID: uid, MaxBodyBytes: c.cfg.MaxIntentBytes,
		NoMemoryEmptyDir: c.cfg.NoMemoryEmptyDir, NoUserNamespaces: c.cfg.NoUserNamespaces,
	})
}

// answer gives the result of an intent that is not applied.
func (c *Consumer) answer(ctx context.Context, p *podQueue, d *delivery, cand candidate, v verdict) {
	r := c.newResult(p.uid, d, cand.intent)
	r.Outcome, r.Error = v.outcome, v.reason
	if v.outcome == schemas.OutcomeRejected {
		c.emitRejected(ctx, p.uid, d, r)
	}
	c.finish(ctx, d, r, trace.SpanContextFromContext(ctx))
}

// apply syncs the pod to an accepted intent and gives its result.
func (c *Consumer) apply(ctx context.Context, p *podQueue, d *delivery, in *schemas.PodIntent) {
	p.done = applied{seq: d.seq, revision: max(p.done.revision, in.Revision)}
	c.mu.Lock()
	p.deletedAt = deletedAt(in)
	c.mu.Unlock()

	syncCtx, span := tracer.Start(ctx, "sync")
	want := podworkers.Desired{UID: p.uid, Intent: in, IntentSeq: d.seq, ReceivedAt: d.receivedAt}
	c.record(want) // before the sync: a start without the bus goes on from it
	rep := c.sync.Sync(syncCtx, want)
	if rep.Refused != nil {
		c.forget(p.uid)
	}
	if rep.Err != nil {
		span.SetStatus(codes.Error, rep.Err.Error())
	}
	span.End()
	r := c.newResult(p.uid, d, in)
	r.Actions, r.Status = rep.Actions, rep.Status
	switch {
	case rep.Refused != nil:
		r.Outcome, r.Reason, r.Error = schemas.OutcomeRejected, rep.Refused.Reason, rep.Refused.Message
		c.emitRejected(ctx, p.uid, d, r)
	case rep.Err != nil:
		r.Outcome, r.Error = schemas.OutcomeFailed, rep.Err.Error()
	default:
		r.Outcome = schemas.OutcomeSynced
	}
	c.finish(ctx, d, r, span.SpanContext())
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

// finish hands the result, whose traceparent is from, to the outbox: its
// intent is acked once it is stored. It waits only while the outbox is
// full.
func (c *Consumer) finish(ctx context.Context, d *delivery, r *schemas.SyncResult, from trace.SpanContext) {
	r.FinishedAt = time.Now().UTC()
	c.out.add(&answer{d: d, r: r, intent: context.WithoutCancel(ctx), from: from})
}

// emitRejected says that an intent was refused: invalid (reason Rejected),
// or its pod refused at admission (kubelet's reason).
func (c *Consumer) emitRejected(ctx context.Context, uid string, d *delivery, r *schemas.SyncResult) {
	c.emit.Emit(ctx, schemas.LifecycleEvent{
		ID:        "intent." + c.cfg.Node + "." + strconv.FormatUint(d.seq, 10) + ".rejected",
		Type:      schemas.EventIntentRejected,
		UID:       uid,
		Namespace: r.Namespace,
		Pod:       r.Name,
		Reason:    cmp.Or(r.Reason, "Rejected"),
		Message:   r.Error,
		Time:      time.Now().UTC(),
		IntentSeq: d.seq,
		Revision:  r.Revision,
	})
}

func (c *Consumer) startSpan(ctx context.Context, d *delivery, uid string) (context.Context, trace.Span) {
	ctx = natsjs.ExtractTrace(ctx, d.header)
	return tracer.Start(ctx, "jetlet.intent "+uid, trace.WithSpanKind(trace.SpanKindConsumer))
}
