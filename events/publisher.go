package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
)

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	Node          string
	SubjectPrefix string
	// EventBuffer bounds the events waiting for NATS (default 65536).
	EventBuffer int
	// TerminatedStatusTTL is the per-message TTL of a Terminated status.
	TerminatedStatusTTL time.Duration
	Logger              zerolog.Logger
	Metrics             *Metrics
}

func (c *PublisherConfig) setDefaults() {
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = schemas.DefaultSubjectPrefix
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = 1 << 16
	}
	if c.TerminatedStatusTTL == 0 {
		c.TerminatedStatusTTL = time.Hour
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
}

// Publisher publishes results, lifecycle events and pod statuses for one node.
//
// Results are published synchronously: the caller acks its intent only once
// the result is stored. Events and statuses are queued and published in the
// background by Run, retrying with back-off while NATS is unreachable, so a
// pod sync never waits on them.
type Publisher struct {
	js   jetstream.JetStream
	cfg  PublisherConfig
	subj schemas.Subjects
	log  zerolog.Logger

	events  chan *nats.Msg
	dropped atomic.Bool

	statusMu      sync.Mutex
	statusPending map[string]*nats.Msg // key → newest status not yet stored
	statusWake    chan struct{}

	// queued counts the events and statuses not yet stored; Flush waits for
	// it to reach zero (a WaitGroup cannot be added to while waited on).
	queuedMu sync.Mutex
	queued   int
	drained  *sync.Cond

	resultsMu sync.Mutex
	results   jetstream.Stream
}

// NewPublisher returns a Publisher; nothing is sent before Run.
func NewPublisher(js jetstream.JetStream, cfg PublisherConfig) *Publisher {
	cfg.setDefaults()
	p := &Publisher{
		js:            js,
		cfg:           cfg,
		subj:          schemas.Subjects{Prefix: cfg.SubjectPrefix},
		log:           cfg.Logger.With().Str("component", "publisher").Logger(),
		events:        make(chan *nats.Msg, cfg.EventBuffer),
		statusPending: map[string]*nats.Msg{},
		statusWake:    make(chan struct{}, 1),
	}
	p.drained = sync.NewCond(&p.queuedMu)
	return p
}

// track adds n (negative when stored) to the messages not yet stored.
func (p *Publisher) track(n int) {
	p.queuedMu.Lock()
	p.queued += n
	if p.queued == 0 {
		p.drained.Broadcast()
	}
	p.queuedMu.Unlock()
}

// PublishResult stores the result of an intent and returns once JetStream has
// acknowledged it. Its Nats-Msg-Id is <node>.<intent seq>, so the result of a
// redelivered intent is stored once. ctx carries the intent's trace context.
func (p *Publisher) PublishResult(ctx context.Context, r *schemas.SyncResult) error {
	r.APIVersion, r.Kind = schemas.APIVersion, schemas.KindSyncResult
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	msg := nats.NewMsg(p.subj.Result(p.cfg.Node, r.UID))
	msg.Data = data
	msg.Header.Set(schemas.HeaderIntentSeq, strconv.FormatUint(r.IntentSeq, 10))
	injectTrace(ctx, msg.Header)
	if _, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(schemas.ResultMsgID(p.cfg.Node, r.IntentSeq))); err != nil {
		p.cfg.Metrics.PublishFailures.WithLabelValues("result").Inc()
		return fmt.Errorf("publish result of intent %d: %w", r.IntentSeq, err)
	}
	return nil
}

// ResultsStored returns the intent sequences answered by the results stored
// for pod uid of this node ("" for every pod) at or after since, reading
// only their headers.
func (p *Publisher) ResultsStored(ctx context.Context, uid string, since time.Time) (map[uint64]bool, error) {
	stream, err := p.resultsStream(ctx)
	if err != nil {
		return nil, err
	}
	if uid == "" {
		uid = "*"
	}
	oc, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{p.subj.Result(p.cfg.Node, uid)},
		DeliverPolicy:  jetstream.DeliverByStartTimePolicy,
		OptStartTime:   &since,
		HeadersOnly:    true,
	})
	if err != nil {
		return nil, err
	}
	info, err := oc.Info(ctx)
	if err != nil {
		return nil, err
	}
	answered := make(map[uint64]bool, info.NumPending)
	for left := info.NumPending; left > 0; {
		batch, err := oc.Fetch(int(min(left, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, err
		}
		got := uint64(0)
		for m := range batch.Messages() {
			got++
			if seq, err := strconv.ParseUint(m.Headers().Get(schemas.HeaderIntentSeq), 10, 64); err == nil {
				answered[seq] = true
			}
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if got == 0 {
			break // aged out meanwhile
		}
		left -= min(got, left)
	}
	return answered, nil
}

// resultsStream returns the results stream's handle, looked up once.
func (p *Publisher) resultsStream(ctx context.Context) (jetstream.Stream, error) {
	p.resultsMu.Lock()
	defer p.resultsMu.Unlock()
	if p.results == nil {
		s, err := p.js.Stream(ctx, schemas.StreamResults)
		if err != nil {
			return nil, err
		}
		p.results = s
	}
	return p.results, nil
}

// Emit queues a lifecycle event. It never blocks: when the buffer is full the
// event is dropped, counted and logged, and TakeDropped reports it so that the
// relist can derive the facts again (with the same ids).
func (p *Publisher) Emit(ctx context.Context, ev schemas.LifecycleEvent) {
	ev.APIVersion, ev.Kind, ev.Node = schemas.APIVersion, schemas.KindLifecycleEvent, p.cfg.Node
	data, err := json.Marshal(ev)
	if err != nil {
		p.log.Error().Err(err).Str("event", ev.ID).Msg("encode event")
		return
	}
	msg := nats.NewMsg(p.subj.Event(p.cfg.Node, ev.UID, ev.Type))
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, ev.ID)
	injectTrace(ctx, msg.Header)
	p.track(1)
	select {
	case p.events <- msg:
		p.cfg.Metrics.EventsBuffered.Inc()
	default:
		p.track(-1)
		p.cfg.Metrics.EventsDropped.Inc()
		if !p.dropped.Swap(true) {
			p.log.Error().Int("buffer", cap(p.events)).Str("event", ev.ID).
				Msg("event buffer full; dropping events until NATS catches up (the relist will derive them again)")
		}
	}
}

// TakeDropped reports whether an event was dropped since the last call.
func (p *Publisher) TakeDropped() bool { return p.dropped.Swap(false) }

// PutStatus queues the pod's status for the jetlet_status bucket. Only the
// newest status per pod is kept while one waits, which is all the bucket keeps.
func (p *Publisher) PutStatus(st *schemas.PodStatus) {
	data, err := json.Marshal(st)
	if err != nil {
		p.log.Error().Err(err).Str("uid", st.UID).Msg("encode status")
		return
	}
	key := schemas.StatusKey(p.cfg.Node, st.UID)
	msg := nats.NewMsg("$KV." + schemas.BucketStatus + "." + key)
	msg.Data = data
	if st.Phase == schemas.PhaseTerminated {
		// The bucket expires this one on its own.
		msg.Header.Set(jetstream.MsgTTLHeader, p.cfg.TerminatedStatusTTL.String())
	}
	p.statusMu.Lock()
	if _, waiting := p.statusPending[key]; !waiting {
		p.track(1)
	}
	p.statusPending[key] = msg
	p.statusMu.Unlock()
	select {
	case p.statusWake <- struct{}{}:
	default:
	}
}

// Run publishes queued events and statuses until ctx is done.
func (p *Publisher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { p.runEvents(ctx) })
	wg.Go(func() { p.runStatuses(ctx) })
	wg.Wait()
}

// Flush waits until everything queued so far is stored, or ctx is done.
func (p *Publisher) Flush(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		p.queuedMu.Lock()
		p.drained.Broadcast()
		p.queuedMu.Unlock()
	})
	defer stop()
	p.queuedMu.Lock()
	defer p.queuedMu.Unlock()
	for p.queued > 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("flush: %d events and statuses not yet stored: %w", p.queued, ctx.Err())
		}
		p.drained.Wait()
	}
	return nil
}

// ackTimeout bounds the wait for JetStream's acknowledgement of a batch.
const ackTimeout = 10 * time.Second

// eventBatch bounds the events in flight at once.
const eventBatch = 256

func (p *Publisher) runEvents(ctx context.Context) {
	batch := make([]*nats.Msg, 0, eventBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-p.events:
			batch = append(batch[:0], m)
		}
	fill:
		for len(batch) < eventBatch {
			select {
			case m := <-p.events:
				batch = append(batch, m)
			default:
				break fill
			}
		}
		p.cfg.Metrics.EventsBuffered.Sub(float64(len(batch)))
		if err := p.publishAll(ctx, "event", batch); err != nil {
			return // ctx done
		}
		p.track(-len(batch))
	}
}

func (p *Publisher) runStatuses(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.statusWake:
		}
		p.statusMu.Lock()
		batch := make([]*nats.Msg, 0, len(p.statusPending))
		for k, m := range p.statusPending {
			batch = append(batch, m)
			delete(p.statusPending, k)
		}
		p.statusMu.Unlock()
		if err := p.publishAll(ctx, "status", batch); err != nil {
			return
		}
		p.track(-len(batch))
	}
}

// publishAll stores every message, in order, retrying the ones that failed with
// back-off until they are stored or ctx is done.
func (p *Publisher) publishAll(ctx context.Context, kind string, msgs []*nats.Msg) error {
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(50*time.Millisecond),
		backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0)), ctx)
	pending := msgs
	return backoff.RetryNotify(func() error {
		futures := make([]jetstream.PubAckFuture, 0, len(pending))
		var failed []*nats.Msg
		var firstErr error
		for _, m := range pending {
			f, err := p.js.PublishMsgAsync(m)
			if err != nil {
				failed = append(failed, m)
				firstErr = cmpErr(firstErr, err)
				continue
			}
			futures = append(futures, f)
		}
		// An ack lost with a server that died never arrives: give up on every
		// one still missing after ackTimeout and publish it again (the message
		// id dedupes a late store).
		waitCtx, cancel := context.WithTimeout(ctx, ackTimeout)
		defer cancel()
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				failed = append(failed, f.Msg())
				firstErr = cmpErr(firstErr, err)
			case <-waitCtx.Done():
				if ctx.Err() != nil {
					return backoff.Permanent(ctx.Err())
				}
				failed = append(failed, f.Msg())
				firstErr = cmpErr(firstErr, errors.New("no acknowledgement"))
			}
		}
		if len(failed) == 0 {
			return nil
		}
		p.cfg.Metrics.PublishFailures.WithLabelValues(kind).Add(float64(len(failed)))
		pending = failed
		return fmt.Errorf("%d of %d %s messages not stored: %w", len(failed), len(msgs), kind, firstErr)
	}, b, func(err error, next time.Duration) {
		p.log.Warn().Err(err).Dur("retry_in", next).Msg("publish failed; retrying")
	})
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
