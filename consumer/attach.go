package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/bus"
)

// A pull request lives with the consumer's leader: when that server dies the
// request dies with it and nothing tells jetlet. Heartbeats every second let
// nats.go notice after two missed ones and pull again from the new leader,
// rather than after 30 s with its defaults.
const (
	pullHeartbeat = time.Second
	pullExpiry    = 10 * time.Second
)

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
		Replicas:       c.cfg.DurableReplicas,
		MemoryStorage:  c.cfg.DurableReplicas == 1,
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

// consume starts delivering the durable consumer's intents to receive,
// pulling with heartbeats.
func (c *Consumer) consume(ctx context.Context, cons jetstream.Consumer) (jetstream.ConsumeContext, error) {
	cc, err := cons.Consume(c.receive, jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if !errors.Is(err, jetstream.ErrNoHeartbeat) && ctx.Err() == nil {
			c.log.Warn().Err(err).Msg("consume")
		}
	}))
	if err != nil {
		return nil, fmt.Errorf("consume intents: %w", err)
	}
	return cc, nil
}
