package reconcile

import (
	"sync"
	"time"
)

// Backoff is a per-key exponential back-off with kubelet's semantics
// (client-go flowcontrol.Backoff, without jitter):
//
//   - Next(key, t) records a failure at t: the first failure sets the delay to
//     Initial; each next failure doubles it, up to Max.
//   - IsInBackOffSince(key, t) is true while less than the current delay has
//     passed since t (for containers, t is the last exit, finishedAt).
//   - An entry not updated for ResetAfter (kubelet: twice Max, 10 minutes by
//     default) is forgotten: the next failure starts again from Initial.
//
// It is safe for concurrent use.
type Backoff struct {
	clock      Clock
	initial    time.Duration
	max        time.Duration
	resetAfter time.Duration

	mu      sync.Mutex
	entries map[string]*backoffEntry
}

type backoffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

// NewBackoff returns a Backoff; resetAfter 0 means twice max.
func NewBackoff(clock Clock, initial, max, resetAfter time.Duration) *Backoff {
	if resetAfter == 0 {
		resetAfter = 2 * max
	}
	return &Backoff{clock: clock, initial: initial, max: max, resetAfter: resetAfter, entries: map[string]*backoffEntry{}}
}

func (b *Backoff) expired(eventTime, lastUpdate time.Time) bool {
	return eventTime.Sub(lastUpdate) > b.resetAfter
}

// Next records a failure of key that happened at eventTime.
func (b *Backoff) Next(key string, eventTime time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(eventTime, e.lastUpdate) {
		e = &backoffEntry{delay: b.initial}
		b.entries[key] = e
	} else {
		e.delay = min(2*e.delay, b.max)
	}
	e.lastUpdate = b.clock.Now()
}

// Get returns the current delay of key (0 when it has none).
func (b *Backoff) Get(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.delay
	}
	return 0
}

// IsInBackOffSince reports whether less than key's delay has passed since eventTime.
func (b *Backoff) IsInBackOffSince(key string, eventTime time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(eventTime, e.lastUpdate) {
		return false
	}
	return b.clock.Now().Sub(eventTime) < e.delay
}

// IsInBackOffSinceUpdate reports whether less than key's delay has passed
// since its last failure was recorded (image pulls).
func (b *Backoff) IsInBackOffSinceUpdate(key string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(now, e.lastUpdate) {
		return false
	}
	return now.Sub(e.lastUpdate) < e.delay
}

// GC forgets every key not updated for resetAfter.
func (b *Backoff) GC() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for k, e := range b.entries {
		if now.Sub(e.lastUpdate) > b.resetAfter {
			delete(b.entries, k)
		}
	}
}
