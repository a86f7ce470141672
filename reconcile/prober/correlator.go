package prober

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// client-go's EventCorrelator defaults (tools/record/events_cache.go), which
// kubelet's event recorder uses.
const (
	// The spam filter: a token bucket per event source and involved object
	// (for probes, the pod), burst 25, refilled one token per 5 minutes.
	spamBurst  = 25
	spamRefill = 5 * time.Minute
	// The aggregator: once 10 distinct messages of similar events (same
	// object, type and reason) come within 10 minutes of each other, every
	// further one is folded into an aggregate.
	aggregateMaxEvents = 10
	aggregateInterval  = 10 * time.Minute
	aggregatePrefix    = "(combined from similar events): "
)

// correlator rate-limits the Unhealthy events of each pod as client-go's
// EventCorrelator limits kubelet's: the aggregator first, then the spam
// filter. Its state is per pod, dropped with the pod's workers.
type correlator struct {
	mu   sync.Mutex
	pods map[string]*podEvents // by uid; guarded by mu
}

// podEvents is the correlator's record of one pod.
type podEvents struct {
	bucket *rate.Limiter
	// The aggregator's record: the distinct messages seen, and when the last
	// event came (older than aggregateInterval: a fresh record).
	messages map[string]struct{}
	last     time.Time
}

func newCorrelator() *correlator { return &correlator{pods: map[string]*podEvents{}} }

// correlate returns the message to emit for an event of pod uid with message
// msg at t (folded once the aggregator's threshold is reached), or false when
// the spam filter drops the event.
func (c *correlator) correlate(uid, msg string, t time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pods[uid]
	if !ok {
		p = &podEvents{bucket: rate.NewLimiter(rate.Every(spamRefill), spamBurst)}
		c.pods[uid] = p
	}
	if t.Sub(p.last) > aggregateInterval {
		p.messages = map[string]struct{}{}
	}
	p.messages[msg], p.last = struct{}{}, t
	if len(p.messages) >= aggregateMaxEvents {
		// client-go keeps the set below the threshold by dropping one
		// message: every further event stays folded.
		for m := range p.messages {
			delete(p.messages, m)
			break
		}
		msg = aggregatePrefix + msg
	}
	return msg, p.bucket.AllowN(t, 1)
}

// forget drops the pod's record.
func (c *correlator) forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}
