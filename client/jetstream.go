package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// intentPartitions is how many streams hold the intents: 1 for
// JETLET_INTENTS alone, else the partition streams' count (docs/scaling.md).
func (c *Client) intentPartitions(ctx context.Context) (int, error) {
	c.partitionsMu.Lock()
	defer c.partitionsMu.Unlock()
	if c.partitions > 0 {
		return c.partitions, nil
	}
	var n int
	err := c.ridingOut(ctx, "stream "+schemas.StreamIntents, func(ctx context.Context) (err error) {
		n, err = natsjs.IntentPartitions(ctx, c.js)
		return err
	})
	if err != nil {
		return 0, c.jsError("stream "+schemas.StreamIntents, err)
	}
	c.partitions = n
	return n, nil
}

// IntentsStream is the stream that holds node's intents.
func (c *Client) IntentsStream(ctx context.Context, node string) (string, error) {
	n, err := c.intentPartitions(ctx)
	if err != nil {
		return "", err
	}
	return schemas.IntentsStream(node, n), nil
}

// intentsStreams are the streams that hold the intents of node, or of
// every node when node is "" or a wildcard.
func (c *Client) intentsStreams(ctx context.Context, node string) ([]string, error) {
	n, err := c.intentPartitions(ctx)
	if err != nil {
		return nil, err
	}
	if node == "" || node == "*" {
		return schemas.IntentsStreams(n), nil
	}
	return []string{schemas.IntentsStream(node, n)}, nil
}

// stream opens a jetlet stream, explaining what its absence means.
func (c *Client) stream(ctx context.Context, name string) (jetstream.Stream, error) {
	var s jetstream.Stream
	err := c.ridingOut(ctx, "stream "+name, func(ctx context.Context) (err error) {
		s, err = c.js.Stream(ctx, name)
		return err
	})
	if err != nil {
		return nil, c.jsError("stream "+name, err)
	}
	return s, nil
}

// bucket opens a jetlet KV bucket, explaining what its absence means.
func (c *Client) bucket(ctx context.Context, name string) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := c.ridingOut(ctx, "bucket "+name, func(ctx context.Context) (err error) {
		kv, err = c.js.KeyValue(ctx, name)
		return err
	})
	if err != nil {
		return nil, c.jsError("bucket "+name, err)
	}
	return kv, nil
}

// jsError says what a failed JetStream call means for what the caller was
// doing, as ErrNotFound or ErrDenied where it is one.
func (c *Client) jsError(what string, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("NATS at %s has no JetStream for this account; point --nats-url at the server `jetlet run` uses", c.url)
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrBucketNotFound):
		return errorOf(ErrNotFound, err, "%s not found at %s; start `jetlet run` once against this NATS to create the streams and buckets (or check --subject-prefix)", what, c.url)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout), errors.Is(err, context.Canceled):
		if pe := c.denied.last.Load(); pe != nil {
			return &DeniedError{What: what, URL: c.url, Permission: pe}
		}
		return errorOf(err, nil, "%s: NATS at %s did not answer in time", what, c.url)
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected):
		return fmt.Errorf("%s: lost the connection to NATS at %s", what, c.url)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// deniedError is the *DeniedError when a watched ctx ended on a refusal.
func (c *Client) deniedError(ctx context.Context, what, hint string) (error, bool) {
	if pe, ok := natsjs.Denied(ctx); ok {
		return &DeniedError{What: what, URL: c.url, Permission: pe, Hint: hint}, true
	}
	return nil, false
}
