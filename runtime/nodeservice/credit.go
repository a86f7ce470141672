package nodeservice

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errClientGone ends a stream whose client stopped granting credit.
var errClientGone = errors.New("no credit from the client: it went away")

// credit is a log stream's flow control: chunk seq may be sent once
// seq <= acked+window. The credit subscription's goroutine grants; the
// stream's goroutine waits.
type credit struct {
	window int64
	// mu guards acked.
	mu    sync.Mutex
	acked int64
	// more wakes a waiter; heard tells watch the client is there. Each
	// holds at most one signal.
	more, heard chan struct{}
}

func newCredit(window int) *credit {
	return &credit{window: int64(window), more: make(chan struct{}, 1), heard: make(chan struct{}, 1)}
}

// grant records the client's credit message: it has consumed chunk seq.
func (c *credit) grant(seq int64) {
	c.mu.Lock()
	c.acked = max(c.acked, seq)
	c.mu.Unlock()
	for _, ch := range []chan struct{}{c.more, c.heard} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// wait blocks until chunk seq may be sent, or ctx ends.
func (c *credit) wait(ctx context.Context, seq int64) error {
	for {
		c.mu.Lock()
		ok := seq <= c.acked+c.window
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-c.more:
		}
	}
}

// watch cancels the stream with errClientGone when no credit message
// comes for timeout, until ctx ends.
func (c *credit) watch(ctx context.Context, cancel context.CancelCauseFunc, timeout time.Duration) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.heard:
			t.Reset(timeout)
		case <-t.C:
			cancel(errClientGone)
			return
		}
	}
}
