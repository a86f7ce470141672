// Package condwake wakes the waiters of a sync.Cond when a context ends, so
// that a wait on a condition can also end with its context.
package condwake

import (
	"context"
	"sync"
)

// OnDone broadcasts c, holding c.L, once ctx is done: a waiter re-checks
// its condition and ctx. The returned stop releases it (defer it).
func OnDone(ctx context.Context, c *sync.Cond) (stop func() bool) {
	return context.AfterFunc(ctx, func() {
		c.L.Lock()
		c.Broadcast()
		c.L.Unlock()
	})
}
