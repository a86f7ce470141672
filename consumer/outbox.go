package consumer

import (
	"context"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/jetlet/jetlet/internal/condwake"
	"github.com/jetlet/jetlet/schemas"
)

// answer is an intent's result waiting to be stored, with the intent's
// trace context (its publish's span goes under the intent's) and the span
// the result's traceparent names (the sync's, or the intent's when there
// was no sync).
type answer struct {
	d      *delivery
	r      *schemas.SyncResult
	intent context.Context
	from   trace.SpanContext
}

// outbox holds the answers waiting to be stored, each pod's in intent order,
// and the answerers store them in the background: a worker goes on to its
// next sync while the results stream cannot take writes (a leader being
// elected, a stalled server), and pods keep starting. An intent stays held,
// kept alive, until its result is stored; only then is it acked.
//
// Its fields are guarded by mu. A pod is in ready when it has answers and
// none of them is being stored; one answerer at a time stores a pod's
// answers, in order.
type outbox struct {
	mu      sync.Mutex
	changed *sync.Cond // an answer added or stored, or the outbox closed
	pods    map[string][]*answer
	ready   []string
	storing map[string]bool // pods an answerer holds
	held    int             // answers in the outbox
	limit   int
	closed  bool
}

func newOutbox(limit int) *outbox {
	o := &outbox{pods: map[string][]*answer{}, storing: map[string]bool{}, limit: limit}
	o.changed = sync.NewCond(&o.mu)
	return o
}

// add queues a behind its pod's earlier answers, waiting while the outbox
// is full (unless it is closing: a sync cancelled at shutdown still gives
// its answer, for handBack to return its intent).
func (o *outbox) add(a *answer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.held >= o.limit && !o.closed {
		o.changed.Wait()
	}
	uid := a.r.UID
	if len(o.pods[uid]) == 0 && !o.storing[uid] {
		o.ready = append(o.ready, uid)
	}
	o.pods[uid] = append(o.pods[uid], a)
	o.held++
	o.changed.Broadcast()
}

// next waits for a pod with answers that no answerer holds, holds it and
// returns its first answer; false once the outbox is closed.
func (o *outbox) next() (*answer, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.ready) == 0 && !o.closed {
		o.changed.Wait()
	}
	if o.closed {
		return nil, false
	}
	uid := o.ready[0]
	o.ready = o.ready[1:]
	o.storing[uid] = true
	return o.pods[uid][0], true
}

// stored removes a, which next returned and is now stored, and releases its
// pod.
func (o *outbox) stored(a *answer) {
	o.mu.Lock()
	defer o.mu.Unlock()
	uid := a.r.UID
	delete(o.storing, uid)
	if o.pods[uid] = o.pods[uid][1:]; len(o.pods[uid]) > 0 {
		o.ready = append(o.ready, uid)
	} else {
		delete(o.pods, uid)
	}
	o.held--
	o.changed.Broadcast()
}

// waitEmpty waits until every answer is stored or ctx is done.
func (o *outbox) waitEmpty(ctx context.Context) {
	defer condwake.OnDone(ctx, o.changed)()
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.held > 0 && ctx.Err() == nil {
		o.changed.Wait()
	}
}

// close ends next's waits and add's: the answerers stop.
func (o *outbox) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	o.changed.Broadcast()
}

// answerer stores the outbox's answers until it is closed.
func (c *Consumer) answerer(ctx context.Context) {
	for {
		a, ok := c.out.next()
		if !ok {
			return
		}
		if !c.store(ctx, a) {
			return // ctx done: the intent is handed back
		}
		c.out.stored(a)
	}
}

// store publishes a's result, retrying with back-off until it is stored
// (then acks its intent) or ctx is done.
func (c *Consumer) store(ctx context.Context, a *answer) bool {
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(100*time.Millisecond),
		backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0)), ctx)
	err := backoff.RetryNotify(func() error {
		ctx, span := tracer.Start(a.intent, "publish result")
		defer span.End()
		err := c.results.PublishResult(trace.ContextWithSpanContext(ctx, a.from), a.r)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		return err
	}, b, func(err error, next time.Duration) {
		c.log.Warn().Err(err).Uint64("seq", a.d.seq).Dur("retry_in_ms", next).Msg("result not stored yet; the pod goes on meanwhile")
	})
	if err != nil {
		return false
	}
	c.m.intents.WithLabelValues(string(a.r.Outcome)).Inc()
	c.settle(a.d, func(m jetstream.Msg) error { return m.Ack() })
	return true
}
