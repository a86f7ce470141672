// Package periodic runs a function at a fixed period until its context ends:
// the loop of every background task of jetlet (heartbeat, log rotation,
// garbage collection, health checks), said once.
package periodic

import (
	"context"
	"time"
)

// Every calls fn every period until ctx is done; the first call is one
// period after the start (call fn first for one at once). A call that runs
// longer than period delays the next, never doubles it.
func Every(ctx context.Context, period time.Duration, fn func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}
