package condwake_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jetlet/jetlet/internal/condwake"
)

// A wait on a condition that never comes true ends with its context.
func TestAWaitEndsWithItsContext(t *testing.T) {
	var mu sync.Mutex
	c := sync.NewCond(&mu)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer condwake.OnDone(ctx, c)()
		mu.Lock()
		defer mu.Unlock()
		for ctx.Err() == nil {
			c.Wait()
		}
	}()
	cancel()
	<-done
}
