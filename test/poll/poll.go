// Package poll waits in tests for a condition that no event announces.
package poll

import (
	"testing"
	"time"
)

// Interval is how often Until looks again.
const Interval = 20 * time.Millisecond

// Until checks ok every Interval until it holds, and fails the test when
// timeout passes first, saying what was awaited and what was last seen.
func Until(t testing.TB, timeout time.Duration, what func() string, ok func() bool) {
	t.Helper()
	if !Within(timeout, ok) {
		t.Fatalf("waited %s for %s", timeout, what())
	}
}

// Within checks ok every Interval until it holds or timeout passes, and
// says whether it held: for a wait whose caller decides what a timeout
// means.
func Within(timeout time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(Interval)
	}
	return true
}

// Msg is a what for Until that does not change.
func Msg(s string) func() string { return func() string { return s } }
