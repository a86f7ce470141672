package busstream

import (
	"context"
	"errors"
	"sync"
	"time"
)

// ErrPeerGone ends a stream whose other side stopped sending (credit or
// keepalives) for the timeout: it went away, or the bus between did.
var ErrPeerGone = errors.New("nothing heard from the other side: it went away")

// Credit is one direction's flow control: message seq may be sent once
// seq <= acked+window. The receiving side's subscription grants; the
// sender waits.
type Credit struct {
	window int64
	// mu guards acked.
	mu    sync.Mutex
	acked int64
	// more wakes a waiter; heard tells Watch the peer is there. Each
	// holds at most one signal.
	more, heard chan struct{}
}

// NewCredit returns the credit of a window of window messages.
func NewCredit(window int) *Credit {
	return &Credit{window: int64(window), more: make(chan struct{}, 1), heard: make(chan struct{}, 1)}
}

// Grant records the peer's credit message: it has consumed message seq.
func (c *Credit) Grant(seq int64) {
	c.mu.Lock()
	c.acked = max(c.acked, seq)
	c.mu.Unlock()
	signal(c.more)
	c.Heard()
}

// Heard tells Watch that the peer is there (a keepalive).
func (c *Credit) Heard() { signal(c.heard) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Wait blocks until message seq may be sent, or ctx ends.
func (c *Credit) Wait(ctx context.Context, seq int64) error {
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

// Watch cancels with ErrPeerGone when nothing is heard from the peer for
// timeout, until ctx ends.
func (c *Credit) Watch(ctx context.Context, cancel context.CancelCauseFunc, timeout time.Duration) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.heard:
			t.Reset(timeout)
		case <-t.C:
			cancel(ErrPeerGone)
			return
		}
	}
}
