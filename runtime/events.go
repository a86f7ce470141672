package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// GetContainerEvents subscribes to the runtime's container events (the
// Evented PLEG stream) and calls handle for each, in order, from the calling
// goroutine. It blocks until ctx is done (returning nil), or the stream
// fails or ends (returning an error).
//
// Runtimes without the call (containerd 1.6) make it return an error
// wrapping ErrUnimplemented at once, before any event: callers fall back to
// relisting. When the runtime closes the stream cleanly the error wraps
// ErrUnavailable, since the caller must resubscribe and relist either way.
// No timeout applies; the call is never retried.
func (c *Client) GetContainerEvents(ctx context.Context, handle func(*runtimeapi.ContainerEventResponse)) error {
	return c.FollowContainerEvents(ctx, nil, handle)
}

// FollowContainerEvents is GetContainerEvents calling ready (when not nil)
// once the stream is open, before any event: a caller that relists then
// misses (almost) nothing that happens after its relist began.
func (c *Client) FollowContainerEvents(ctx context.Context, ready func(), handle func(*runtimeapi.ContainerEventResponse)) error {
	const method = "GetContainerEvents"
	conn, err := c.connection(method)
	if err != nil {
		return err
	}
	start := time.Now()
	err = c.recvEvents(ctx, conn, ready, handle)
	if c.cfg.Observe != nil {
		c.cfg.Observe(method, time.Since(start), err)
	}
	return err
}

func (c *Client) recvEvents(ctx context.Context, conn *connection, ready func(), handle func(*runtimeapi.ContainerEventResponse)) error {
	const method = "GetContainerEvents"
	stream, err := conn.runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return convertError(c.target, method, err)
	}
	// Runtimes send no headers until their first event, so the open stream
	// is all there is to wait for; one without the call answers the first
	// Recv with Unimplemented.
	if ready != nil {
		ready()
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("%w: cri %s at %s: the runtime closed the event stream", ErrUnavailable, method, c.target)
			}
			return convertError(c.target, method, err)
		}
		handle(ev)
	}
}
