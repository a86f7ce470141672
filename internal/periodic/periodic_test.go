package periodic

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestEveryCallsAtEachPeriodUntilTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		var at []time.Duration
		start := time.Now()
		done := make(chan struct{})
		go func() {
			Every(ctx, time.Second, func() {
				at = append(at, time.Since(start))
				if len(at) == 3 {
					cancel()
				}
			})
			close(done)
		}()
		<-done
		if want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}; len(at) != 3 || at[0] != want[0] || at[1] != want[1] || at[2] != want[2] {
			t.Fatalf("called at %v, want %v", at, want)
		}
	})
}
