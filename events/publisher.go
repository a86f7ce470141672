// Package events publishes the lifecycle events of a node's pods and
// containers, each stored once in JETLET_EVENTS however often its fact is
// seen (the ledger).
package events

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// Config configures an EventPublisher.
type Config struct {
	// Node is the node whose events these are; an event's subject is
	// <prefix>.event.<node>.<uid>.<type>.
	Node          string
	SubjectPrefix string
	// EventBuffer bounds the events waiting for NATS (default 65536).
	EventBuffer int
	Logger      zerolog.Logger
	// Metrics counts what is dropped, waits and was stored already
	// (default: registered nowhere).
	Metrics *Metrics
	// Failures counts the events not stored at once, under kind "event",
	// and the ledgers not read back, under "ledger" (natsjs.NewPublishFailures;
	// default: registered nowhere).
	Failures *prometheus.CounterVec
	// Denials ends at once a read-back NATS denies; nil leaves it to its
	// timeout.
	Denials *natsjs.Denials
	// SpoolDir keeps the queued events on disk until they are stored, and
	// queues again at start those a previous run left there; "" keeps them
	// in memory only.
	SpoolDir string
}

// SetDefaults fills what is unset.
func (c *Config) SetDefaults() {
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = schemas.DefaultSubjectPrefix
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = 1 << 16
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	if c.Failures == nil {
		c.Failures = natsjs.NewPublishFailures(nil)
	}
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = natsjs.ErrInvalidConfig

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	if c.EventBuffer < 1 {
		return fmt.Errorf("%w: event buffer %d < 1", ErrInvalidConfig, c.EventBuffer)
	}
	return cmp.Or(natsjs.CheckNode(c.Node), natsjs.CheckSubjectPrefix(c.SubjectPrefix))
}

// EventPublisher publishes the lifecycle events of one node.
//
// Events are queued and published in the background by Run, retrying with
// back-off while NATS is unreachable, so a pod sync never waits on them. An
// event whose id its pod's ledger holds is not published again.
type EventPublisher struct {
	js   jetstream.JetStream
	cfg  Config
	subj schemas.Subjects
	out  *natsjs.Outbox // counts the events not yet stored

	events  chan queuedEvent
	dropped atomic.Bool
	ledger  ledger // owned by Run

	// spoolMu orders each event's append to the spool with its send on
	// events (so both have one order), and guards spool and spoolOpened.
	spoolMu     sync.Mutex
	spool       *spool // nil: none, or it failed
	spoolOpened bool
}

// New returns an EventPublisher; nothing is sent before Run.
func New(js jetstream.JetStream, cfg Config) (*EventPublisher, error) {
	if err := natsjs.Prepare(js, &cfg); err != nil {
		return nil, err
	}
	return &EventPublisher{
		js:     js,
		cfg:    cfg,
		subj:   schemas.Subjects{Prefix: cfg.SubjectPrefix},
		out:    natsjs.NewOutbox(js, cfg.Failures, cfg.Logger),
		events: make(chan queuedEvent, cfg.EventBuffer),
		ledger: ledger{pods: map[string]*podLedger{}},
	}, nil
}

// Emit queues a lifecycle event. It never blocks: when the buffer is full the
// event is dropped, counted and logged, and TakeDropped reports it so that the
// relist can derive the facts again (with the same ids).
func (p *EventPublisher) Emit(ctx context.Context, ev schemas.LifecycleEvent) {
	ev.APIVersion, ev.Kind, ev.Node = schemas.APIVersion, schemas.KindLifecycleEvent, p.cfg.Node
	if !schemas.ValidUID(ev.UID) {
		// No subject and no ledger for it: it would hold back every other.
		p.out.Log().Error().Str("event", ev.ID).Str("uid", ev.UID).Msg("event without a valid pod uid dropped")
		return
	}
	data, err := json.Marshal(ev)
	if err != nil {
		p.out.Log().Error().Err(err).Str("event", ev.ID).Msg("encode event")
		return
	}
	msg := nats.NewMsg(p.subj.Event(p.cfg.Node, ev.UID, ev.Type))
	msg.Data = data
	// The window dedupes a publish retried after a lost ack; the ledger
	// everything else.
	msg.Header.Set(jetstream.MsgIDHeader, ev.ID)
	// And a CloudEvent's attributes, for CloudEvents consumers (binary mode).
	ce := schemas.CloudEventOf(&ev)
	ce.SetHeaders(msg.Header)
	natsjs.InjectTrace(ctx, msg.Header)
	p.enqueue(queuedEvent{uid: ev.UID, id: ev.ID, terminal: ev.Type == schemas.EventPodTerminated, msg: msg})
}

// enqueue spools e and queues it, unless the buffer is full: then it is
// dropped and counted. Only enqueue sends on events, under spoolMu, so a
// buffer with room keeps it.
func (p *EventPublisher) enqueue(e queuedEvent) {
	p.spoolMu.Lock()
	defer p.spoolMu.Unlock()
	p.openSpoolLocked()
	if len(p.events) == cap(p.events) {
		p.cfg.Metrics.EventsDropped.Inc()
		if !p.dropped.Swap(true) {
			p.out.Log().Error().Int("buffer", cap(p.events)).Str("event", e.id).
				Msg("event buffer full; dropping events until NATS catches up (the relist will derive them again)")
		}
		return
	}
	if p.spool != nil {
		if err := p.spool.append(&e); err != nil {
			p.spoolFailedLocked(err)
		}
	}
	p.out.Add(1)
	p.events <- e
	p.cfg.Metrics.EventsBuffered.Inc()
}

// openSpoolLocked opens the spool once and queues the events a previous
// run left in it, before any new one. The caller holds spoolMu.
func (p *EventPublisher) openSpoolLocked() {
	if p.spoolOpened || p.cfg.SpoolDir == "" {
		return
	}
	p.spoolOpened = true
	sp, left, err := openSpool(p.cfg.SpoolDir)
	if err != nil {
		p.spoolFailedLocked(err)
		return
	}
	p.spool = sp
	for _, e := range left {
		if len(p.events) == cap(p.events) {
			p.cfg.Metrics.EventsDropped.Inc()
			p.dropped.Store(true)
			continue
		}
		p.out.Add(1)
		p.events <- e
		p.cfg.Metrics.EventsBuffered.Inc()
	}
	if len(left) > 0 {
		p.out.Log().Info().Int("events", len(left)).Str("dir", p.cfg.SpoolDir).Msg("queued again the events a previous run kept on disk")
	}
}

// spoolFailedLocked gives up the spool: events are kept in memory only.
// The caller holds spoolMu.
func (p *EventPublisher) spoolFailedLocked(err error) {
	p.out.Log().Error().Err(err).Str("dir", p.cfg.SpoolDir).Msg("event spool failed; queued events are kept in memory only from now on")
	p.spool = nil
}

// settleSpool drops from the spool the events up to n, stored.
func (p *EventPublisher) settleSpool(n uint64) {
	p.spoolMu.Lock()
	defer p.spoolMu.Unlock()
	if p.spool == nil || n == 0 {
		return
	}
	if err := p.spool.settle(n); err != nil {
		p.spoolFailedLocked(err)
	}
}

// TakeDropped reports whether an event was dropped since the last call.
func (p *EventPublisher) TakeDropped() bool { return p.dropped.Swap(false) }

// Flush waits until every event queued so far is stored, or ctx is done.
func (p *EventPublisher) Flush(ctx context.Context) error {
	return p.out.Wait(ctx, "events")
}

// eventBatch bounds the events in flight at once.
const eventBatch = 256

// queuedEvent is an event waiting to be published.
type queuedEvent struct {
	uid, id string
	// terminal: no fact of the pod follows (PodTerminated), so its ledger
	// can go once this is stored.
	terminal bool
	msg      *nats.Msg
	n        uint64 // its number in the spool (0: not spooled)
}

// Run publishes queued events until ctx is done.
func (p *EventPublisher) Run(ctx context.Context) {
	p.spoolMu.Lock()
	p.openSpoolLocked()
	p.spoolMu.Unlock()
	batch := make([]queuedEvent, 0, eventBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-p.events:
			batch = append(batch[:0], e)
		}
	fill:
		for len(batch) < eventBatch {
			select {
			case e := <-p.events:
				batch = append(batch, e)
			default:
				break fill
			}
		}
		p.cfg.Metrics.EventsBuffered.Sub(float64(len(batch)))
		if err := p.publishEvents(ctx, batch); err != nil {
			return // ctx done
		}
		p.settleSpool(batch[len(batch)-1].n)
		p.out.Add(-len(batch))
	}
}

// publishEvents stores each event of batch that its pod's ledger does not
// hold, in order, retrying with back-off until each is stored or ctx is done.
// A ledger that cannot be read back (NATS away) holds its pod's events back:
// none is published blind. Each pod has one event in flight at a time (the
// ledger's guard needs its last sequence), so the batch goes out in rounds:
// the next event of every pod at once.
func (p *EventPublisher) publishEvents(ctx context.Context, batch []queuedEvent) error {
	pending := batch
	return p.out.Retry(ctx, func() error {
		if err := p.loadLedgers(ctx, pending); err != nil {
			return err
		}
		queues := map[string][]queuedEvent{} // each pod's events to store, in order
		var uids []string
		inBatch := map[[2]string]bool{}
		for _, e := range pending {
			key := [2]string{e.uid, e.id}
			if p.ledger.stored(e.uid, e.id) || inBatch[key] {
				p.cfg.Metrics.EventsStored.Inc()
				continue
			}
			inBatch[key] = true
			if queues[e.uid] == nil {
				uids = append(uids, e.uid)
			}
			queues[e.uid] = append(queues[e.uid], e)
		}
		var failed []queuedEvent
		var firstErr error
		var terminated []string
		for len(uids) > 0 {
			msgs := make([]*nats.Msg, len(uids))
			for i, uid := range uids {
				msgs[i] = p.guarded(queues[uid][0])
			}
			acks, err := p.out.PublishOnce(ctx, "event", msgs)
			firstErr = cmp.Or(firstErr, err)
			next := uids[:0]
			for i, uid := range uids {
				e := queues[uid][0]
				switch {
				case acks[i] == nil:
					// Stored or not, unknown until read back: the pod's
					// events wait for the next try.
					failed = append(failed, queues[uid]...)
					p.ledger.forget(uid)
					continue
				case e.terminal:
					terminated = append(terminated, uid)
					fallthrough
				default:
					p.ledger.add(uid, e.id, acks[i].Sequence)
				}
				if queues[uid] = queues[uid][1:]; len(queues[uid]) > 0 {
					next = append(next, uid)
				}
			}
			uids = next
		}
		for _, uid := range terminated {
			p.ledger.forget(uid)
		}
		pending = failed
		if firstErr != nil {
			return fmt.Errorf("%d of %d events not stored: %w", len(failed), len(batch), firstErr)
		}
		return nil
	})
}

// guarded sets e's guard: the stream stores it only if the last event of
// its pod is the one its ledger knows.
func (p *EventPublisher) guarded(e queuedEvent) *nats.Msg {
	e.msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(p.ledger.lastOf(e.uid), 10))
	e.msg.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, p.subj.PodEvents(p.cfg.Node, e.uid))
	return e.msg
}
