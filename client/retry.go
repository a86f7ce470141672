package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// tryTimeout bounds one try of a call retried by ridingOut: a server that
// died holding the request never answers it.
const tryTimeout = 5 * time.Second

// patience bounds ridingOut's tries when the command has no deadline of its
// own: long enough for the cluster to elect new leaders after a server loss
// (4 to 9 s in nats-server), short enough not to hang a script.
const patience = 30 * time.Second

// ridingOut runs op, a call that is safe to repeat (a read, a lookup, a
// publish with its message id), until it succeeds, fails for a reason
// waiting cannot mend, or ctx ends. While the cluster lost a server or
// elects a leader (no answer, no responders, "temporarily unavailable", the
// connection moving to another server), it tries again with back-off, each
// try bounded by tryTimeout, and says once on stderr what it waits for. The
// error is the last try's. Without a deadline in ctx it tries for patience.
func (c *Client) ridingOut(ctx context.Context, what string, op func(ctx context.Context) error) error {
	return c.ridingOutEach(ctx, what, tryTimeout, op)
}

// ridingOutEach is ridingOut with each try bounded by try, or by op itself
// when try is 0 (a read whose length depends on what it reads, which ends a
// try that stops making progress).
func (c *Client) ridingOutEach(ctx context.Context, what string, try time.Duration, op func(ctx context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, patience)
		defer cancel()
	}
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(250*time.Millisecond),
		backoff.WithMaxInterval(2*time.Second),
		backoff.WithMaxElapsedTime(0)), ctx)
	said := false
	var last error
	err := backoff.Retry(func() error {
		tryCtx, cancel := context.WithCancel(ctx)
		if try > 0 {
			tryCtx, cancel = context.WithTimeout(ctx, try)
		}
		defer cancel()
		last = op(tryCtx)
		switch {
		case last == nil:
			return nil
		case ctx.Err() != nil || !transient(last) || c.denied.last.Load() != nil:
			return backoff.Permanent(last)
		}
		if !said {
			said = true
			why := trimNATSPrefix(last)
			if errors.Is(last, context.DeadlineExceeded) || errors.Is(last, nats.ErrTimeout) {
				why = fmt.Sprintf("no answer in %s (a server lost, or a leader being elected?)", tryTimeout)
			}
			fmt.Fprintf(c.progress, "waiting for NATS at %s: %s: %s; trying again%s\n", c.url, what, why, until(ctx))
		}
		return last
	}, b)
	if err != nil && last != nil {
		return last
	}
	return err
}

// until says when ctx gives up.
func until(ctx context.Context) string {
	d, _ := ctx.Deadline()
	return fmt.Sprintf(" for up to %s", time.Until(d).Round(time.Second))
}

// errStreamElecting is a publish no server answered for a stream that
// exists: it has no leader yet (publishIntent tells it from a missing
// stream).
var errStreamElecting = errors.New("no leader to store it yet")

// transient reports whether err is one a cluster losing a server or electing
// a leader gives: gone once it is done.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Code == http.StatusServiceUnavailable || apiErr.Code == http.StatusRequestTimeout
	}
	// Plain "no responders" is not: API requests are answered or forwarded
	// by any server, so none answering is no JetStream at all. A stream
	// publish is the exception, told apart by errStreamElecting.
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrConnectionReconnecting) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, jetstream.ErrConsumerLeadershipChanged) || errors.Is(err, jetstream.ErrNoHeartbeat) ||
		errors.Is(err, errStreamElecting)
}
