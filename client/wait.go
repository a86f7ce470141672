package client

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
)

// Result is the SyncResult that answers one intent, and its JSON as stored.
type Result struct {
	*schemas.SyncResult
	Raw json.RawMessage
}

// WaitOptions say what Wait reports while it waits.
type WaitOptions struct {
	// OnEvent, if set, is handed the pod's lifecycle events stored after
	// the intent was published, in order, until the result is read: a
	// node may store an event of the sync after its result, which is not
	// handed over.
	OnEvent func(*schemas.LifecycleEvent)
}

// errFound ends a stream read once the wanted message is in hand.
var errFound = errors.New("found")

// Wait waits for the SyncResult that answers in, until ctx ends. in was
// published by Publish, or is one stored before (its Node, UID and Seq
// set): its result may be stored already, and only the events from now on
// are handed to OnEvent. A result with outcome Rejected is returned with a
// *RejectedError (errors.Is(err, ErrRejected)); any other outcome with a
// nil error: check Outcome.
func (c *Client) Wait(ctx context.Context, in *Intent, opts WaitOptions) (*Result, error) {
	if !in.marked && opts.OnEvent != nil {
		m, err := c.marks(ctx)
		if err != nil {
			return nil, err
		}
		in.after.events = m.events
	}
	next := in.after.events + 1 // the next event sequence to hand over
	var wg sync.WaitGroup
	evCtx, stopEvents := context.WithCancel(ctx)
	if opts.OnEvent != nil {
		wg.Go(func() { next = c.podEvents(evCtx, in, next, true, opts.OnEvent) })
	}
	defer func() { stopEvents(); wg.Wait() }()

	start := in.after.results + 1
	if in.Duplicate {
		// The intent was stored before this publish: so may its result.
		start = 1
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.subj.Result(in.Node, in.UID)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
	}
	var res Result
	err := c.readStream(ctx, schemas.StreamResults, cfg, true, func(msg jetstream.Msg) error {
		r, seq, ok := decodeResult(msg)
		if !ok || seq != in.Seq {
			return nil
		}
		res = Result{SyncResult: &r, Raw: msg.Data()}
		return errFound
	})
	switch {
	case errors.Is(err, errFound):
		if opts.OnEvent != nil {
			// The events stored before the result too.
			stopEvents()
			wg.Wait()
			c.podEvents(ctx, in, next, false, opts.OnEvent)
		}
		if res.Outcome == schemas.OutcomeRejected {
			return &res, &RejectedError{Result: res.SyncResult}
		}
		return &res, nil
	case err != nil:
		return nil, err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, errorOf(context.DeadlineExceeded, nil, "no result for %s (intent %d) from node %s in time (--timeout); is `jetlet run --node %s` running? `jetlet get nodes` lists the live nodes",
			in.label(), in.Seq, in.Node, in.Node)
	}
	return nil, errorOf(context.Canceled, nil, "interrupted while waiting for the result of %s (intent %d); it was published and will be applied", in.label(), in.Seq)
}

// podEvents hands fn the pod's events from sequence start on, until ctx is
// done (follow) or up to the end of the stream. It returns the sequence
// after the last event handed over.
func (c *Client) podEvents(ctx context.Context, in *Intent, start uint64, follow bool, fn func(*schemas.LifecycleEvent)) uint64 {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.subj.Event(in.Node, in.UID, "*")},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
	}
	// Progress only: a failure here must not fail the wait.
	_ = c.readStream(ctx, schemas.StreamEvents, cfg, follow, func(msg jetstream.Msg) error {
		if md, err := msg.Metadata(); err == nil {
			start = md.Sequence.Stream + 1
		}
		var ev schemas.LifecycleEvent
		if json.Unmarshal(msg.Data(), &ev) == nil {
			fn(&ev)
		}
		return nil
	})
	return start
}

// decodeResult reads a message of JETLET_RESULTS and the sequence of the
// intent it answers: its Jetlet-Intent-Seq header, else the result's own
// intentSeq. ok is false for a message that is not a result this client
// can read.
func decodeResult(msg jetstream.Msg) (res schemas.SyncResult, intentSeq uint64, ok bool) {
	if json.Unmarshal(msg.Data(), &res) != nil {
		return res, 0, false
	}
	seq, err := strconv.ParseUint(msg.Headers().Get(schemas.HeaderIntentSeq), 10, 64)
	if err != nil || seq == 0 {
		seq = res.IntentSeq
	}
	return res, seq, true
}
