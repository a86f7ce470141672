package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// validateIntent checks an intent body exactly as the node will, and returns
// the problems in the words of a Rejected result, one per entry (nil when the
// intent is valid). Privileged containers are let through: only the node
// knows whether it runs with --allow-privileged.
func validateIntent(body []byte, node, uid string) []string {
	_, err := schemas.DecodeIntent(body, schemas.IntentTarget{Node: node, UID: uid})
	if err == nil {
		return nil
	}
	var list schemas.ValidationErrors
	if !errors.As(err, &list) {
		return []string{err.Error()}
	}
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.Error()
	}
	return out
}

// intentMsgID is the Nats-Msg-Id of an intent: the same intent published
// again within the stream's duplicate window (a retried publish) is stored
// once.
func intentMsgID(subject string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(subject))
	h.Write([]byte{'\n'})
	h.Write(body)
	return "jetlet-cli-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// publishIntent stores the intent in JETLET_INTENTS and records its sequence.
func (c *client) publishIntent(ctx context.Context, pi *plannedIntent) error {
	subject := c.subj.Intent(pi.node, pi.uid)
	stream, err := c.intentsStream(ctx, pi.node)
	if err != nil {
		return fmt.Errorf("publish %s: %w", pi.label, err)
	}
	msg := nats.NewMsg(subject)
	msg.Data = pi.body
	ctx, stop := c.denied.Watch(ctx, subject)
	defer stop()
	// Its message id makes a retry safe within the duplicate window.
	var ack *jetstream.PubAck
	err = c.ridingOut(ctx, "publish "+pi.label, func(ctx context.Context) (err error) {
		ack, err = c.js.PublishMsg(ctx, msg,
			jetstream.WithMsgID(intentMsgID(subject, pi.body)),
			jetstream.WithExpectStream(stream))
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			// Only a stream's leader listens on its subjects: none answers
			// while it elects one, as none does when there is no stream.
			if _, infoErr := c.js.Stream(ctx, stream); !errors.Is(infoErr, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("%w: %s: %v", errStreamElecting, stream, err)
			}
		}
		return err
	})
	if err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
			if stream != schemas.StreamIntents {
				return fmt.Errorf("publish %s: no stream stores %s at %s, though %s exists: do the servers map the intents to their partitions (`jetlet nats-config --intent-partitions`, docs/scaling.md)?", pi.label, subject, c.url, stream)
			}
			return fmt.Errorf("publish %s: no stream stores %s at %s; start `jetlet run` once against this NATS to create the streams (or check --subject-prefix)", pi.label, subject, c.url)
		}
		if denied, ok := natsjs.Denied(ctx); ok {
			return fmt.Errorf("publish %s: NATS at %s denied these credentials: %w; publishing intents takes the scheduler's", pi.label, c.url, denied)
		}
		return fmt.Errorf("publish %s to %s: %w", pi.label, subject, err)
	}
	pi.seq, pi.duplicate = ack.Sequence, ack.Duplicate
	return nil
}

// streamMarks are the last sequences of the results and events streams before
// anything was published.
type streamMarks struct{ results, events uint64 }

func (c *client) marks(ctx context.Context) (streamMarks, error) {
	var m streamMarks
	for name, seq := range map[string]*uint64{schemas.StreamResults: &m.results, schemas.StreamEvents: &m.events} {
		s, err := c.stream(ctx, name)
		if err != nil {
			return m, err
		}
		*seq = s.CachedInfo().State.LastSeq
	}
	return m, nil
}
