package busstream

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

func TestCredit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := NewCredit(2)
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		go c.Watch(ctx, cancel, 10*time.Second)
		if err := c.Wait(ctx, 2); err != nil {
			t.Fatalf("chunk 2 within the window: %v", err)
		}
		waited := make(chan error, 1)
		go func() { waited <- c.Wait(ctx, 3) }()
		synctest.Wait()
		select {
		case err := <-waited:
			t.Fatalf("chunk 3 sent without credit: %v", err)
		default:
		}
		time.Sleep(9 * time.Second)
		c.Grant(1) // also a keepalive: the timeout starts again
		if err := <-waited; err != nil {
			t.Fatal(err)
		}
		time.Sleep(9 * time.Second)
		if ctx.Err() != nil {
			t.Fatal("stopped although credit came within the timeout")
		}
		time.Sleep(2 * time.Second)
		if !errors.Is(context.Cause(ctx), ErrPeerGone) {
			t.Fatalf("cause %v, want ErrPeerGone", context.Cause(ctx))
		}
		if err := c.Wait(ctx, 4); !errors.Is(err, ErrPeerGone) {
			t.Fatalf("wait after the client went: %v", err)
		}
	})
}
