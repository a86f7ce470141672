package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// RemoveNode deletes what a node that will not come back leaves on the
// server: its durable and replay consumers on its intents stream, its
// pods' statuses in jetlet_status and its record in jetlet_nodes. Its
// intents, results and events stay. A node whose heartbeat is fresh is
// refused. It returns what it removed ("consumer NAME", "N status keys",
// "node record"); nothing at all is ErrNotFound. It takes the operator's
// credentials.
func (c *Client) RemoveNode(ctx context.Context, name string) ([]string, error) {
	if !schemas.ValidNodeName(name) {
		return nil, errorOf(ErrInvalid, nil, "%q is not a node name (a DNS-1123 label)", name)
	}
	statuses, err := c.Statuses(ctx, name)
	if err != nil {
		return nil, err
	}
	nodes, err := c.NodesOf(ctx, name, statuses)
	if err != nil {
		return nil, err
	}
	var st *Node
	if len(nodes) > 0 {
		st = nodes[0]
	}
	now := time.Now()
	if st.Live(now) {
		return nil, fmt.Errorf("node %s is live (heartbeat %s ago): stop its jetlet first", name, now.Sub(st.Record.HeartbeatAt).Round(time.Second))
	}
	stream, err := c.IntentsStream(ctx, name)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, cons := range []string{natsjs.DurableName(name), natsjs.ReplayName(name)} {
		err := c.js.DeleteConsumer(ctx, stream, cons)
		switch {
		case err == nil:
			removed = append(removed, "consumer "+cons)
		case !errors.Is(err, jetstream.ErrConsumerNotFound):
			return removed, c.jsError("delete consumer "+cons+" of "+stream, err)
		}
	}
	if len(statuses) > 0 { // deleted pods' too
		if err := c.purge(ctx, "KV_"+schemas.BucketStatus, "$KV."+schemas.BucketStatus+"."+name+".>"); err != nil {
			return removed, err
		}
		removed = append(removed, fmt.Sprintf("%d status keys", len(statuses)))
	}
	if st != nil && (st.Record != nil || !st.StoppedAt.IsZero()) {
		if err := c.purge(ctx, "KV_"+schemas.BucketNodes, "$KV."+schemas.BucketNodes+"."+name); err != nil {
			return removed, err
		}
		removed = append(removed, "node record")
	}
	if len(removed) == 0 {
		return nil, &NotFoundError{Msg: fmt.Sprintf("node %s not found: no consumer, status or record of it at %s", name, c.url)}
	}
	return removed, nil
}

// purge removes every message of stream on subject, deletes included.
func (c *Client) purge(ctx context.Context, stream, subject string) error {
	s, err := c.stream(ctx, stream)
	if err != nil {
		return err
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return c.jsError("purge "+subject, err)
	}
	return nil
}
