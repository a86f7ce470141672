package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas/natsjs"
)

// A pull request lives with the consumer's leader: when that server dies the
// request dies with it and nothing tells jetlet. Heartbeats every second let
// nats.go notice after two missed ones and pull again from the new leader,
// rather than after 30 s with its defaults.
const (
	pullHeartbeat = 5 * time.Second
	pullExpiry    = 30 * time.Second
)

// consumerConfig is the node's durable consumer.
func (c *Consumer) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:     natsjs.DurableName(c.cfg.Node),
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
		MemoryStorage:  c.cfg.DurableInMemory,
	}
}

// attach creates the durable consumer, or updates it to the node's
// settings. Where it starts stays as it was made: the start of the stream,
// or the sequence it was made anew from (remakeDurable), which JetStream
// does not let an update change. Nor may an update move its state between
// memory and file (--intake-replicas changed): then it is made anew.
func (c *Consumer) attach(ctx context.Context) (jetstream.ConsumeContext, error) {
	cfg := c.consumerConfig()
	if was := c.durableFound; was != nil { // as recovery found it
		if was.MemoryStorage != cfg.MemoryStorage {
			return c.remakeDurable(ctx, fmt.Errorf("its state moves between memory and file (replicas %d to %d)", was.Replicas, cfg.Replicas), true)
		}
		cfg.DeliverPolicy, cfg.OptStartSeq = was.DeliverPolicy, was.OptStartSeq
	}
	cons, err := c.createFiltered(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.noteDurableServer(cons.CachedInfo())
	return c.consume(ctx, cons)
}

// createFiltered creates or updates the durable consumer as cfg says, with
// one filter only where the node's permissions allow no more.
func (c *Consumer) createFiltered(ctx context.Context, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	create := "$JS.API.CONSUMER.CREATE." + c.cfg.IntentsStream + "." + cfg.Durable
	cons, err := c.createDurable(ctx, create, cfg)
	var denied *natsjs.PermissionError
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
// *natsjs.PermissionError.
func (c *Consumer) createDurable(ctx context.Context, create string, cfg jetstream.ConsumerConfig) (cons jetstream.Consumer, err error) {
	err = natsjs.UnlessDenied(ctx, c.cfg.Denials, create, func(ctx context.Context) error {
		cons, err = c.js.CreateOrUpdateConsumer(ctx, c.cfg.IntentsStream, cfg)
		return err
	})
	return cons, err
}

// consume starts delivering the durable consumer's intents to receive,
// pulling with heartbeats. Missed heartbeats, or the consumer gone, wake
// superviseIntake.
func (c *Consumer) consume(ctx context.Context, cons jetstream.Consumer) (jetstream.ConsumeContext, error) {
	c.mu.Lock()
	// A consumer made anew counts from 1, and has forgotten nothing.
	c.lastDeliverySeq, c.durableForgot = 0, nil
	c.mu.Unlock()
	cc, err := cons.Consume(c.receive, jetstream.PullExpiry(pullExpiry), jetstream.PullHeartbeat(pullHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, jetstream.ErrNoHeartbeat) || errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
			c.wakeSupervisor()
		}
		if !errors.Is(err, jetstream.ErrNoHeartbeat) {
			c.log.Warn().Err(err).Msg("consume")
		}
	}))
	if err != nil {
		return nil, fmt.Errorf("consume intents: %w", err)
	}
	return cc, nil
}

const (
	// intakeLookTimeout bounds a look at the durable consumer, or at the
	// intents stream's peers.
	intakeLookTimeout = 2 * time.Second
	// intakeServerSilence is how long the intents stream's leader must not
	// have heard from a server (its Raft heartbeats come every second)
	// before a durable consumer kept in memory on that server is taken for
	// lost with it. A server that is only slow to answer API requests, as
	// under overload, still heartbeats: its consumer is waited for.
	intakeServerSilence = 5 * time.Second
)

// wakeSupervisor has superviseIntake look at the durable consumer; a wake
// already pending covers this one.
func (c *Consumer) wakeSupervisor() {
	select {
	case c.intakeTrouble <- struct{}{}:
	default:
	}
}

// superviseIntake makes the durable consumer anew when it is gone: deleted,
// or (kept in memory on one server, DurableInMemory) lost with its
// server, which JetStream does not move, or restarted with it, having
// forgotten what was acked. It runs until ctx is done and
// returns the consume context then in use.
func (c *Consumer) superviseIntake(ctx context.Context, cc jetstream.ConsumeContext) jetstream.ConsumeContext {
	for {
		select {
		case <-ctx.Done():
			return cc
		case <-c.intakeTrouble:
		}
		c.mu.Lock()
		lost := c.durableForgot // cleared when it is made anew (consume)
		c.mu.Unlock()
		if lost == nil {
			lost = c.waitForDurable(ctx)
		}
		if ctx.Err() != nil {
			return cc
		}
		if lost == nil {
			continue // there: nats.go pulls again itself
		}
		// Stopped first: the old consumer's deliveries after the new one
		// starts would pass for those of one that forgot.
		cc.Stop()
		select {
		case <-cc.Closed():
		case <-time.After(intakeLookTimeout):
		}
		for {
			next, err := c.remakeDurable(ctx, lost, false)
			if err == nil {
				cc = next
				break
			}
			c.log.Warn().Err(err).Msg("the durable consumer could not be made anew; trying again")
			select {
			case <-ctx.Done():
				return cc
			case <-time.After(time.Second):
			}
		}
	}
}

// waitForDurable looks at the durable consumer until it answers (nil), or
// it is found gone, or (kept in memory on one server) it is taken for lost
// with its server: then it returns why.
func (c *Consumer) waitForDurable(ctx context.Context) error {
	for {
		lookCtx, cancel := context.WithTimeout(ctx, intakeLookTimeout)
		cons, err := c.js.Consumer(lookCtx, c.cfg.IntentsStream, natsjs.DurableName(c.cfg.Node))
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			c.noteDurableServer(cons.CachedInfo())
			return nil
		case errors.Is(err, jetstream.ErrConsumerNotFound):
			return err
		}
		if c.cfg.DurableInMemory {
			if gone := c.durableServerGone(ctx); gone != nil {
				return fmt.Errorf("%w, and the durable consumer does not answer: %v", gone, err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// noteDurableServer keeps the server the durable consumer lives on, as its
// info says.
func (c *Consumer) noteDurableServer(info *jetstream.ConsumerInfo) {
	if info != nil && info.Cluster != nil && info.Cluster.Leader != "" {
		c.durableServer = info.Cluster.Leader
	}
}

// durableServerGone asks the intents stream's leader about the server the
// durable consumer lives on (every server, when that is not known): an
// error names one the leader has not heard from for intakeServerSilence.
// A stream that does not answer tells nothing: nil.
func (c *Consumer) durableServerGone(ctx context.Context) error {
	lookCtx, cancel := context.WithTimeout(ctx, intakeLookTimeout)
	defer cancel()
	stream, err := c.js.Stream(lookCtx, c.cfg.IntentsStream)
	if err != nil {
		return nil
	}
	info := stream.CachedInfo()
	return silentPeer(info.Cluster, info.TimeStamp, c.durableServer)
}

// silentPeer names the stream peer server (any, when server is empty) that
// its leader, as of now (the server's clock), takes for offline or has not
// heard from for intakeServerSilence: since it last did, or, never having
// heard from it, since it took the lead (a leader elected after a server
// died never hears from it). nil when there is none. A durable consumer
// lives on its stream's peers, so its server, unless leading, is among them.
func silentPeer(cluster *jetstream.ClusterInfo, now time.Time, server string) error {
	if cluster == nil {
		return nil
	}
	var led time.Duration
	if cluster.LeaderSince != nil {
		led = now.Sub(*cluster.LeaderSince)
	}
	for _, p := range cluster.Replicas {
		if server != "" && p.Name != server {
			continue
		}
		silent := p.Active
		if silent == 0 && !p.Current {
			silent = led
		}
		if p.Offline || silent >= intakeServerSilence {
			return fmt.Errorf("server %s not heard from by the stream's leader %s for %s (offline: %t)",
				p.Name, cluster.Leader, silent.Round(time.Millisecond), p.Offline)
		}
	}
	return nil
}

// remakeDurable deletes the durable consumer (the meta layer removes it
// even while its server is away) and makes it anew, from the first intent
// not answered when fromFloor (right after recovery, which read every
// intent of the node: every one at or below the floor was answered), else
// from the first intent of the node the stream keeps: while consuming, an
// intent delivered by a server as it died may never have reached the node,
// below intents that did, and only the stream knows it. Deliveries of
// intents taken before are checked against the results
// (delivery.seenBefore).
func (c *Consumer) remakeDurable(ctx context.Context, why error, fromFloor bool) (jetstream.ConsumeContext, error) {
	name := natsjs.DurableName(c.cfg.Node)
	delCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_ = c.js.DeleteConsumer(delCtx, c.cfg.IntentsStream, name)
	cancel()
	cfg := c.consumerConfig()
	if fromFloor {
		c.mu.Lock()
		floor := c.answeredFloorLocked()
		c.mu.Unlock()
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, floor+1
	}
	cons, err := c.createFiltered(ctx, cfg)
	if err != nil {
		return nil, err
	}
	c.noteDurableServer(cons.CachedInfo())
	cc, err := c.consume(ctx, cons)
	if err != nil {
		return nil, err
	}
	c.log.Warn().Err(why).Str("durable", name).Uint64("from_seq", cfg.OptStartSeq).
		Msg("durable consumer made anew")
	return cc, nil
}

// answeredFloorLocked is the highest stream sequence at or below which
// every intent of the node is answered: below the lowest one held or handed
// back, else the highest taken.
func (c *Consumer) answeredFloorLocked() uint64 {
	floor := c.highestTaken
	for seq := range c.held {
		floor = min(floor, seq-1)
	}
	for _, p := range c.queues {
		if p.blockedAt != 0 {
			floor = min(floor, p.blockedAt-1)
		}
	}
	return floor
}
