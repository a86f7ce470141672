package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
)

// errFound ends a stream read once the wanted message is in hand.
var errFound = errors.New("found")

// waitResult waits for the SyncResult answering pi, printing the pod's events
// to progress meanwhile. It returns the result and its JSON as stored.
func (c *client) waitResult(ctx context.Context, pi *plannedIntent, marks streamMarks, progress io.Writer) (*schemas.SyncResult, []byte, error) {
	fmt.Fprintf(progress, "waiting for the result of intent %d on node %s...\n", pi.seq, pi.node)
	evCtx, stopEvents := context.WithCancel(ctx)
	var wg sync.WaitGroup
	next := marks.events + 1 // the next event sequence to show
	wg.Go(func() { next = c.showEvents(evCtx, pi, next, true, progress) })
	defer func() { stopEvents(); wg.Wait() }()

	start := marks.results + 1
	if pi.duplicate {
		// The intent was stored before this apply began: so may its result.
		start = 1
	}
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.subj.Result(pi.node, pi.uid)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
	}
	var res schemas.SyncResult
	var raw []byte
	err := c.readStream(ctx, schemas.StreamResults, cfg, true, func(msg jetstream.Msg) error {
		r, seq, ok := decodeResult(msg)
		if !ok || seq != pi.seq {
			return nil
		}
		res, raw = r, msg.Data()
		return errFound
	})
	switch {
	case errors.Is(err, errFound):
		// Show the events stored before the result too, then the result.
		stopEvents()
		wg.Wait()
		c.showEvents(ctx, pi, next, false, progress)
		return &res, raw, nil
	case err != nil:
		return nil, nil, err
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, nil, fmt.Errorf("no result for %s (intent %d) from node %s in time (--timeout); is `jetlet run --node %s` running? `jetlet get nodes` lists the live nodes",
			pi.label, pi.seq, pi.node, pi.node)
	}
	return nil, nil, fmt.Errorf("interrupted while waiting for the result of %s (intent %d); it was published and will be applied", pi.label, pi.seq)
}

// showEvents prints the pod's events from sequence start on, until ctx is
// done (follow) or up to the end of the stream. It returns the sequence after
// the last event shown.
func (c *client) showEvents(ctx context.Context, pi *plannedIntent, start uint64, follow bool, w io.Writer) uint64 {
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{c.subj.Event(pi.node, pi.uid, "*")},
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
			fmt.Fprintf(w, "  %s\n", eventLine(&ev))
		}
		return nil
	})
	return start
}

// eventLine describes an event in one line: "ContainerDied app: Error, exit code 1".
func eventLine(ev *schemas.LifecycleEvent) string {
	s := string(ev.Type)
	if ev.Container != "" {
		s += " " + ev.Container
	}
	detail := eventReason(ev)
	if ev.Message != "" {
		if detail != "" {
			detail += ": "
		}
		detail += ev.Message
	}
	if detail != "" {
		s += " (" + detail + ")"
	}
	return s
}

// eventReason is an event's reason and exit code: "Error, exit 1".
func eventReason(ev *schemas.LifecycleEvent) string {
	s := ev.Reason
	if ev.ExitCode != nil {
		if s != "" {
			s += ", "
		}
		s += "exit " + strconv.Itoa(int(*ev.ExitCode))
	}
	return s
}
