package natsjs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/jetlet/jetlet/internal/condwake"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// PublishKinds are the kinds of message jetlet_publish_failures_total counts:
// results, lifecycle events, pod statuses, and the read-backs of the event
// ledger.
var PublishKinds = []string{"result", "event", "status", "ledger"}

// NewPublishFailures creates jetlet_publish_failures_total, the publishes to
// JetStream that failed (and were retried) by kind of message, every kind
// present at 0 from the start, and registers it with reg (nil: not
// registered, for tests). The publishers of results, events and statuses
// share one.
func NewPublishFailures(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "jetlet_publish_failures_total",
		Help: "Publishes to JetStream that failed (and were retried), by kind of message.",
	}, []string{"kind"})
	for _, kind := range PublishKinds {
		c.WithLabelValues(kind)
	}
	if reg != nil {
		reg.MustRegister(c)
	}
	return c
}

// AckTimeout bounds the wait for JetStream's acknowledgement of a batch.
const AckTimeout = 10 * time.Second

// Outbox is what a background publisher (of events, of statuses) has queued
// and how it stores it: batches of messages published to JetStream at once,
// each acknowledged or retried with back-off until stored, and a count of
// those queued and not yet stored, for a Flush to wait on. Each message
// carries its own Nats-Msg-Id (or key), so that a message published again
// after a lost acknowledgement is stored once.
type Outbox struct {
	js       jetstream.JetStream
	failures *prometheus.CounterVec
	log      zerolog.Logger

	mu      sync.Mutex
	queued  int // guarded by mu
	drained *sync.Cond
}

// NewOutbox returns an Outbox publishing through js, counting failures in
// failures (NewPublishFailures) and logging to log as the publisher.
func NewOutbox(js jetstream.JetStream, failures *prometheus.CounterVec, log zerolog.Logger) *Outbox {
	o := &Outbox{js: js, failures: failures, log: log.With().Str("component", "publisher").Logger()}
	o.drained = sync.NewCond(&o.mu)
	return o
}

// Log is the publisher's logger.
func (o *Outbox) Log() *zerolog.Logger { return &o.log }

// Retry runs op until it succeeds or ctx is done, with back-off between
// tries. op ends the retries with backoff.Permanent.
func (o *Outbox) Retry(ctx context.Context, op func() error) error {
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(50*time.Millisecond),
		backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0)), ctx)
	return backoff.RetryNotify(op, b, func(err error, next time.Duration) {
		o.log.Warn().Err(err).Dur("retry_in_ms", next).Msg("publish failed; retrying")
	})
}

// PublishAll stores every message, in order, retrying the ones that failed
// with back-off until they are stored or ctx is done.
func (o *Outbox) PublishAll(ctx context.Context, kind string, msgs []*nats.Msg) error {
	pending := msgs
	return o.Retry(ctx, func() error {
		acks, err := o.PublishOnce(ctx, kind, pending)
		var failed []*nats.Msg
		for i, m := range pending {
			if acks[i] == nil {
				failed = append(failed, m)
			}
		}
		pending = failed
		if err != nil {
			return fmt.Errorf("%d of %d %s messages not stored: %w", len(failed), len(msgs), kind, err)
		}
		return nil
	})
}

// PublishOnce publishes msgs at once and waits for their acknowledgements;
// acks[i] is msgs[i]'s, nil when it was not stored. The error is the first
// failure, or a permanent one when ctx is done. Failures are counted under
// kind.
func (o *Outbox) PublishOnce(ctx context.Context, kind string, msgs []*nats.Msg) (acks []*jetstream.PubAck, err error) {
	acks = make([]*jetstream.PubAck, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	for i, m := range msgs {
		f, e := o.js.PublishMsgAsync(m)
		if e != nil {
			err = cmp.Or(err, e)
			continue
		}
		futures[i] = f
	}
	// An ack lost with a server that died never arrives: give up on every
	// one still missing after AckTimeout and publish it again (the message
	// id dedupes a late store).
	waitCtx, cancel := context.WithTimeout(ctx, AckTimeout)
	defer cancel()
	failed := 0
	for i, f := range futures {
		if f == nil { // not sent
			failed++
			continue
		}
		select {
		case ack := <-f.Ok():
			acks[i] = ack
		case e := <-f.Err():
			failed++
			err = cmp.Or(err, e)
		case <-waitCtx.Done():
			if ctx.Err() != nil {
				return acks, backoff.Permanent(ctx.Err())
			}
			failed++
			err = cmp.Or(err, errors.New("no acknowledgement"))
		}
	}
	if failed > 0 {
		o.failures.WithLabelValues(kind).Add(float64(failed))
	}
	return acks, err
}

// Add adds n (negative once stored) to the messages queued and not yet
// stored.
func (o *Outbox) Add(n int) {
	o.mu.Lock()
	o.queued += n
	if o.queued == 0 {
		o.drained.Broadcast()
	}
	o.mu.Unlock()
}

// Wait waits until no message queued is left to store, or ctx is done; what
// names the messages in its error. (A WaitGroup cannot be added to while
// waited on.)
func (o *Outbox) Wait(ctx context.Context, what string) error {
	defer condwake.OnDone(ctx, o.drained)()
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.queued > 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("flush: %d %s not yet stored: %w", o.queued, what, ctx.Err())
		}
		o.drained.Wait()
	}
	return nil
}
