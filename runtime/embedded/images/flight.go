package images

import (
	"context"
	"sync"
)

// flightGroup runs one call per key at a time; callers asking for a key
// whose call is running wait for its result instead of starting another
// (golang.org/x/sync/singleflight, with cancellation). The call runs on a
// context of its own, carrying the first caller's values: a caller that
// gives up stops waiting, and the call is cancelled only when every caller
// waiting for it has given up. The last caller to give up waits until the
// call has returned, so nothing it started is still writing when that
// caller returns.
type flightGroup[T any] struct {
	mu    sync.Mutex
	calls map[string]*flightCall[T] // guarded by mu
}

type flightCall[T any] struct {
	done   chan struct{} // closed when fn has returned and val, err are set
	val    T
	err    error
	cancel context.CancelFunc
	// waiters counts the callers waiting; guarded by the group's mu.
	waiters int
	// abandoned is set, under the group's mu, when every waiter gave up
	// and the call was cancelled: a new caller waits for it to end and
	// starts its own.
	abandoned bool
}

func (g *flightGroup[T]) do(ctx context.Context, key string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	for {
		if err := ctx.Err(); err != nil {
			return zero, err
		}
		g.mu.Lock()
		c, ok := g.calls[key]
		if ok && c.abandoned {
			g.mu.Unlock()
			select {
			case <-c.done:
				continue
			case <-ctx.Done():
				return zero, ctx.Err()
			}
		}
		if !ok {
			if g.calls == nil {
				g.calls = make(map[string]*flightCall[T])
			}
			cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			c = &flightCall[T]{done: make(chan struct{}), cancel: cancel}
			g.calls[key] = c
			go g.run(cctx, key, c, fn)
		}
		c.waiters++
		g.mu.Unlock()

		select {
		case <-c.done:
			return c.val, c.err
		case <-ctx.Done():
		}
		g.mu.Lock()
		c.waiters--
		last := c.waiters == 0
		if last {
			c.abandoned = true
			c.cancel()
		}
		g.mu.Unlock()
		if last {
			<-c.done
		}
		return zero, ctx.Err()
	}
}

func (g *flightGroup[T]) run(ctx context.Context, key string, c *flightCall[T], fn func(context.Context) (T, error)) {
	defer c.cancel()
	c.val, c.err = fn(ctx)
	g.mu.Lock()
	if g.calls[key] == c {
		delete(g.calls, key)
	}
	g.mu.Unlock()
	close(c.done)
}
