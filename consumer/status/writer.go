// Package status is where a node writes what it is: each pod's status in
// the jetlet_status bucket (StatusWriter) and the node's own record, its
// heartbeat, in jetlet_nodes (RunHeartbeat).
package status

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// Config configures a StatusWriter.
type Config struct {
	// Node is the node whose pods' statuses these are; a pod's key is
	// <node>.<uid>.
	Node string
	// TerminatedStatusTTL is the per-message TTL of a Terminated status
	// (default 1h, at least 1s).
	TerminatedStatusTTL time.Duration
	// RefreshWindow is how long a status queued by RefreshStatus may wait
	// to be stored (default 1s); a refresh within it replaces it.
	RefreshWindow time.Duration
	Logger        zerolog.Logger
	// Failures counts the statuses not stored at once under kind "status"
	// (natsjs.NewPublishFailures; default: registered nowhere).
	Failures *prometheus.CounterVec
	// Denials ends at once a read-back (Stored) NATS denies; nil leaves it
	// to its timeout.
	Denials *natsjs.Denials
}

// SetDefaults fills what is unset.
func (c *Config) SetDefaults() {
	if c.TerminatedStatusTTL == 0 {
		c.TerminatedStatusTTL = time.Hour
	}
	if c.RefreshWindow == 0 {
		c.RefreshWindow = time.Second
	}
	if c.Failures == nil {
		c.Failures = natsjs.NewPublishFailures(nil)
	}
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = natsjs.ErrInvalidConfig

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	switch {
	case c.TerminatedStatusTTL < time.Second:
		return fmt.Errorf("%w: terminated status TTL %s < 1s", ErrInvalidConfig, c.TerminatedStatusTTL)
	case c.RefreshWindow < 0:
		return fmt.Errorf("%w: refresh window %s is negative", ErrInvalidConfig, c.RefreshWindow)
	}
	return natsjs.CheckNode(c.Node)
}

// StatusWriter stores the pod statuses of one node in jetlet_status. They
// are queued and stored in the background by Run, retrying with back-off
// while NATS is unreachable, so a pod sync never waits on them; only the
// newest status of a pod waits, which is all the bucket keeps.
type StatusWriter struct {
	js  jetstream.JetStream
	cfg Config
	out *natsjs.Outbox // counts the statuses not yet stored

	mu       sync.Mutex
	pending  map[string]pendingStatus // key → newest status not yet stored
	flushing bool                     // Flush runs: every status is due now
	wake     chan struct{}
}

// New returns a StatusWriter; nothing is written before Run.
func New(js jetstream.JetStream, cfg Config) (*StatusWriter, error) {
	if err := natsjs.Prepare(js, &cfg); err != nil {
		return nil, err
	}
	return &StatusWriter{
		js:      js,
		cfg:     cfg,
		out:     natsjs.NewOutbox(js, cfg.Failures, cfg.Logger),
		pending: map[string]pendingStatus{},
		wake:    make(chan struct{}, 1),
	}, nil
}

// pendingStatus is a status waiting to be stored from due on.
type pendingStatus struct {
	msg *nats.Msg
	due time.Time
}

// PutStatus queues the pod's status for the jetlet_status bucket, to be
// stored at once. Only the newest status per pod is kept while one waits,
// which is all the bucket keeps.
func (w *StatusWriter) PutStatus(st *schemas.PodStatus) {
	w.queue(st, false)
}

// RefreshStatus queues a status that differs from the pod's last one only in
// what readers do not act on (its revision and intent seq, which every
// intent's result carries anyway): it is stored within RefreshWindow, with
// every other refresh of the pod in that window coalesced into it, or at
// once with the pod's next PutStatus. A node answering a stream of no-op
// intents so writes the bucket once a second per pod, not once an intent.
func (w *StatusWriter) RefreshStatus(st *schemas.PodStatus) {
	w.queue(st, true)
}

func (w *StatusWriter) queue(st *schemas.PodStatus, refresh bool) {
	data, err := json.Marshal(st)
	if err != nil {
		w.out.Log().Error().Err(err).Str("uid", st.UID).Msg("encode status")
		return
	}
	key := schemas.StatusKey(w.cfg.Node, st.UID)
	msg := nats.NewMsg("$KV." + schemas.BucketStatus + "." + key)
	msg.Data = data
	if st.Phase == schemas.PhaseTerminated {
		// The bucket expires this one on its own.
		msg.Header.Set(jetstream.MsgTTLHeader, w.cfg.TerminatedStatusTTL.String())
	}
	w.mu.Lock()
	prev, waiting := w.pending[key]
	if !waiting {
		w.out.Add(1)
	}
	var due time.Time // now
	if refresh {
		due = time.Now().Add(w.cfg.RefreshWindow)
		if waiting {
			due = prev.due // a refresh never delays what waits
		}
	}
	w.pending[key] = pendingStatus{msg: msg, due: due}
	w.mu.Unlock()
	if due.IsZero() || !waiting {
		w.wakeUp()
	}
}

func (w *StatusWriter) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run stores queued statuses until ctx is done.
func (w *StatusWriter) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-timer.C:
		}
		batch, next := w.due(time.Now())
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		if len(batch) == 0 {
			continue
		}
		if err := w.out.PublishAll(ctx, "status", batch); err != nil {
			return
		}
		w.out.Add(-len(batch))
	}
}

// due takes the statuses due by now, and says when the next of those left
// is due (zero if none is left).
func (w *StatusWriter) due(now time.Time) (batch []*nats.Msg, next time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, ps := range w.pending {
		if w.flushing || !ps.due.After(now) {
			batch = append(batch, ps.msg)
			delete(w.pending, k)
		} else if next.IsZero() || ps.due.Before(next) {
			next = ps.due
		}
	}
	return batch, next
}

// Flush stores every status queued so far, refreshes too, and waits until
// they are stored, or ctx is done.
func (w *StatusWriter) Flush(ctx context.Context) error {
	w.mu.Lock()
	w.flushing = true
	w.mu.Unlock()
	w.wakeUp()
	defer func() {
		w.mu.Lock()
		w.flushing = false
		w.mu.Unlock()
	}()
	return w.out.Wait(ctx, "statuses")
}
