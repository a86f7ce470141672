// Package pathswap races the code that must open a path without following a
// symbolic link out of its root: it exchanges two paths (a directory and a
// link to the node's /, as a pod would in its volume) in a loop while the
// test opens them.
package pathswap

import (
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Start exchanges a and b (renameat2 RENAME_EXCHANGE: neither name is ever
// missing) in a loop, and returns once the first exchange is done. The loop
// ends when stop is called or, at the latest, when the test ends; stop
// returns once it has.
func Start(t testing.TB, a, b string) (stop func()) {
	t.Helper()
	done, started := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		first := true
		defer func() {
			if first {
				close(started)
			}
		}()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("swap %s and %s: %v", a, b, err)
				return
			}
			if first {
				first = false
				close(started)
			}
		}
	})
	<-started
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}
