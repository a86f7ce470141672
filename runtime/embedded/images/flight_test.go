package images

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
)

// waitWaiters spins until key's call has n waiters.
func waitWaiters[T any](g *flightGroup[T], key string, n int) {
	for {
		g.mu.Lock()
		c := g.calls[key]
		got := c != nil && c.waiters == n
		g.mu.Unlock()
		if got {
			return
		}
		runtime.Gosched()
	}
}

func TestFlightGroupSharesOneCallUntilEveryCallerGivesUp(t *testing.T) {
	var g flightGroup[int]
	var calls atomic.Int32
	release := make(chan struct{})
	fn := func(ctx context.Context) (int, error) {
		calls.Add(1)
		select {
		case <-release:
			return 42, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	ctx1, cancel1 := context.WithCancel(t.Context())
	first := make(chan error)
	go func() {
		_, err := g.do(ctx1, "k", fn)
		first <- err
	}()
	waitWaiters(&g, "k", 1)
	second := make(chan int)
	go func() {
		v, err := g.do(t.Context(), "k", fn)
		if err != nil {
			t.Error(err)
		}
		second <- v
	}()
	waitWaiters(&g, "k", 2)
	cancel1()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller that gave up got %v", err)
	}
	close(release)
	if v := <-second; v != 42 {
		t.Errorf("the caller that waited got %d, want 42", v)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("fn ran %d times, want once", n)
	}
}

func TestFlightGroupCancelsTheCallWhenEveryCallerGaveUp(t *testing.T) {
	var g flightGroup[int]
	var ended atomic.Bool
	fn := func(ctx context.Context) (int, error) {
		<-ctx.Done()
		ended.Store(true)
		return 0, ctx.Err()
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := g.do(ctx, "k", fn)
		done <- err
	}()
	waitWaiters(&g, "k", 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("got %v", err)
	}
	if !ended.Load() {
		t.Error("do returned before the abandoned call ended")
	}
	// The next caller starts a new call.
	v, err := g.do(t.Context(), "k", func(context.Context) (int, error) { return 7, nil })
	if err != nil || v != 7 {
		t.Errorf("a new call after an abandoned one = %d, %v", v, err)
	}
}
