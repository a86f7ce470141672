package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/jetlet/jetlet/schemas/natsjs"
)

// readerInactiveThreshold: the server deletes a reader's consumer that a
// client killed mid-read left behind after this long without a pull.
const readerInactiveThreshold = 10 * time.Second

// readStream hands fn every message of stream that cfg selects, in stream
// order, through an ordered consumer that it deletes when done, so that
// nothing is left behind on the server (a CLI scripted many times a second
// would otherwise fill the server's consumer limit).
// With follow false it stops at the end of the stream as it was when the
// consumer was created; with follow true it goes on until ctx is done, which
// ends it without an error.
func (c *Client) readStream(ctx context.Context, stream string, cfg jetstream.OrderedConsumerConfig, follow bool, fn func(jetstream.Msg) error) error {
	// The ordered consumer retries a denied create until ctx ends: a denial
	// ends it at once, and says which.
	ctx, stop := c.denied.Watch(ctx, "$JS.API.CONSUMER.CREATE."+stream)
	defer stop()
	fail := func(err error) error {
		if denied, ok := c.deniedError(ctx, "stream "+stream, ""); ok {
			return denied
		}
		return c.jsError("stream "+stream, err)
	}
	cfg.InactiveThreshold = readerInactiveThreshold
	cfg.NamePrefix = nuid.Next()
	cons, err := c.js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		// A create cancelled in flight (a follow stopped at once) may still
		// be made on the server: the ordered consumer's first is <prefix>_1.
		c.deleteLateConsumer(stream, cfg.NamePrefix+"_1")
		return fail(err)
	}
	it, err := cons.Messages()
	if err != nil {
		c.deleteConsumer(stream, cons.CachedInfo().Name)
		return fail(err)
	}
	defer c.deleteReader(stream, cons, it)
	if _, denied := natsjs.Denied(ctx); denied {
		return fail(nil)
	}
	if info := cons.CachedInfo(); !follow && (info == nil || info.NumPending == 0) {
		return nil
	}
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if _, denied := natsjs.Denied(ctx); denied {
				return fail(err)
			}
			if follow && ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return fmt.Errorf("reading %s: %w", stream, err)
			}
			return c.jsError("stream "+stream, err)
		}
		if err := fn(msg); err != nil {
			return err
		}
		if follow {
			continue
		}
		md, err := msg.Metadata()
		if err != nil || md.NumPending == 0 {
			return err
		}
	}
}

// deleteReader stops a read and deletes its consumer, under a context of
// its own: the read's may be over (a follow ends with it). A delete that
// fails leaves the consumer to the server's inactive threshold.
func (c *Client) deleteReader(stream string, cons jetstream.Consumer, it jetstream.MessagesContext) {
	it.Stop()
	if info := cons.CachedInfo(); info != nil { // the current one: an ordered consumer is recreated on a gap
		c.deleteConsumer(stream, info.Name)
	}
}

// deleteConsumer deletes a consumer of stream, best effort, under a context
// of its own.
func (c *Client) deleteConsumer(stream, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.js.DeleteConsumer(ctx, stream, name)
}

// lateCreateWindow is how long a create cancelled in flight is looked for:
// the server may make the consumer after a delete meant to undo it (CI saw
// one left).
const lateCreateWindow = 2 * time.Second

// deleteLateConsumer deletes a consumer of stream whose create was cancelled
// in flight, trying again until it is deleted or lateCreateWindow passed.
func (c *Client) deleteLateConsumer(stream, name string) {
	deadline := time.Now().Add(lateCreateWindow)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.js.DeleteConsumer(ctx, stream, name)
		cancel()
		if err == nil || !errors.Is(err, jetstream.ErrConsumerNotFound) || time.Now().After(deadline) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// errStalled ends a read that made no progress for tryTimeout; it counts as
// no answer.
var errStalled = fmt.Errorf("no progress in %s: %w", tryTimeout, context.DeadlineExceeded)

// kvValues returns every value of bucket whose key matches pattern (a
// subject-like filter, ">" for all), decoded into T; values that do not decode
// are skipped. A read that makes no progress for tryTimeout (its watch's
// consumer created on a server that was lost, a leader being elected) is
// given up and tried again, riding out the cluster's fault.
func kvValues[T any](ctx context.Context, c *Client, bucket, pattern string) ([]T, error) {
	kv, err := c.bucket(ctx, bucket)
	if err != nil {
		return nil, err
	}
	var out []T
	err = c.ridingOutEach(ctx, "bucket "+bucket, 0, func(ctx context.Context) error {
		out = nil
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stalled := time.AfterFunc(tryTimeout, func() { cancel(errStalled) })
		defer stalled.Stop()
		w, err := kv.Watch(ctx, pattern, jetstream.IgnoreDeletes())
		if err != nil {
			if errors.Is(context.Cause(ctx), errStalled) {
				return errStalled // nats.go says only "canceled"
			}
			return err
		}
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case e, ok := <-w.Updates():
				if !ok {
					return fmt.Errorf("the watch ended early: %w", context.DeadlineExceeded)
				}
				if e == nil { // every current value has been delivered
					return nil
				}
				stalled.Reset(tryTimeout)
				var v T
				if json.Unmarshal(e.Value(), &v) == nil {
					out = append(out, v)
				}
			}
		}
	})
	if err != nil {
		return nil, c.jsError("bucket "+bucket, err)
	}
	return out, nil
}
