package consumer

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
)

// nakFrom hands batch[i] back to JetStream, to be delivered again after a
// delay that grows with the number of deliveries, and keeps the newer
// batch[i+1:] held and pending: the pod waits for batch[i] to come back and
// then answers them all in stream order. (Handing those back too would let
// them come back in any order, and an older one be answered after a newer.)
// Called by the pod's worker.
func (c *Consumer) nakFrom(ctx context.Context, p *podQueue, batch []*delivery, i int) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.js.PublishMsg(ctx, c.deadLetterMsg(d, reason)); err != nil {
		c.log.Warn().Err(err).Uint64("seq", d.seq).Msg("dead letter not stored; the intent will be redelivered")
		_ = d.msg.NakWithDelay(redeliveryDelay(d.delivered))
		return
	}
	c.m.deadLetters.Inc()
	c.log.Warn().Str("subject", d.msg.Subject()).Uint64("seq", d.seq).Str("reason", reason).Msg("intent dead-lettered")
	_ = d.msg.TermWithReason(reason)
}

// deadLetterMsg is d's copy for the dead-letter subject: its body and
// headers, why and from where, and a message id that stores it once.
func (c *Consumer) deadLetterMsg(d *delivery, reason string) *nats.Msg {
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
	return out
}
