package pleg

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// countingLister is a runtime with no pods that counts the relists.
type countingLister struct {
	mu      sync.Mutex
	relists int
}

func (c *countingLister) GetPods(context.Context, bool) ([]*kubecontainer.RuntimePod, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.relists++
	return nil, nil
}

func (c *countingLister) GetPodStatus(context.Context, string, string, string) (*kubecontainer.PodStatus, error) {
	return nil, nil
}

func (c *countingLister) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.relists
}

// eventStream is a runtime's container event stream the test drives: each
// connection opens (ready), delivers what is sent on events, and ends with
// what is sent on end.
type eventStream struct {
	events chan struct{}
	end    chan error
}

func (s *eventStream) follow(ctx context.Context, ready, event func()) error {
	ready()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.events:
			event()
		case err := <-s.end:
			return err
		}
	}
}

// TestEventedRelistPeriodWhileTheStreamIsUp: with the stream connected the
// relists are EventedPeriod apart and each event relists at once; when it
// breaks, a relist at once and then every Period, until it is back.
func TestEventedRelistPeriodWhileTheStreamIsUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lister := &countingLister{}
		stream := &eventStream{events: make(chan struct{}), end: make(chan error)}
		r := newRelister(t, lister, kubecontainer.EmitterFunc(func(context.Context, schemas.LifecycleEvent) {}), Config{
			Node: "n1", Period: time.Second, EventedPeriod: 300 * time.Second,
			ContainerEvents: stream.follow, Logger: zerolog.Nop(),
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()

		synctest.Wait()
		start := lister.count() // the first relist, and the one the stream's opening asked for
		time.Sleep(299 * time.Second)
		synctest.Wait()
		if got := lister.count(); got != start {
			t.Fatalf("%d relists in 299s with the stream up, want none (evented period 300s)", got-start)
		}
		stream.events <- struct{}{}
		synctest.Wait()
		if got := lister.count(); got != start+1 {
			t.Fatalf("an event made %d relists, want 1 at once", got-start)
		}

		stream.end <- errors.New("stream reset")
		synctest.Wait()
		broke := lister.count()
		if broke != start+2 {
			t.Fatalf("the stream breaking made %d relists, want 1 at once", broke-start-1)
		}
		// Reconnected after the 100ms back-off: a relist, then the long period again.
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if got := lister.count(); got != broke+1 {
			t.Fatalf("reconnecting made %d relists, want 1", got-broke)
		}
		back := lister.count()
		time.Sleep(299 * time.Second)
		synctest.Wait()
		if got := lister.count(); got != back {
			t.Fatalf("%d relists in 299s after the stream came back, want none", got-back)
		}
	})
}

// TestRelistEveryPeriodWithoutEvents: a runtime without the stream
// (containerd 1.6 opens one, then answers Unimplemented) is relisted every
// Period, whatever EventedPeriod says.
func TestRelistEveryPeriodWithoutEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lister := &countingLister{}
		r := newRelister(t, lister, kubecontainer.EmitterFunc(func(context.Context, schemas.LifecycleEvent) {}), Config{
			Node: "n1", Period: time.Second, EventedPeriod: 300 * time.Second,
			ContainerEvents: func(_ context.Context, ready, _ func()) error {
				ready()
				return ErrEventsUnsupported
			},
			Logger: zerolog.Nop(),
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { r.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()

		synctest.Wait()
		start := lister.count()
		time.Sleep(10*time.Second + time.Millisecond)
		synctest.Wait()
		if got := lister.count() - start; got != 10 {
			t.Fatalf("%d relists in 10s without an event stream, want 10 (period 1s)", got)
		}
	})
}
