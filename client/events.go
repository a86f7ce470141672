package client

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
)

// Event is a lifecycle event as stored in JETLET_EVENTS, with its place in
// the stream.
type Event struct {
	// Seq is its sequence in JETLET_EVENTS: a position to resume from
	// (EventsOptions.After).
	Seq uint64
	schemas.LifecycleEvent
	// Raw is the event's JSON as stored.
	Raw json.RawMessage
}

// CloudEvent is the event as a CloudEvent in structured mode: its
// attributes, and the event as stored as data.
func (e *Event) CloudEvent() schemas.CloudEvent {
	ce := schemas.CloudEventOf(&e.LifecycleEvent)
	var b bytes.Buffer
	if json.Compact(&b, e.Raw) == nil {
		ce.Data = b.Bytes()
	} else {
		ce.Data, _ = json.Marshal(&e.LifecycleEvent)
	}
	return ce
}

// EventsOptions select the events Events reads, and where it starts.
type EventsOptions struct {
	// Node selects one node's events ("" for every node).
	Node string
	// Pod selects the events of every uid the pod has had (on Node, or on
	// any node); a pod nobody knows is ErrNotFound. Nil for every pod.
	Pod *PodRef
	// Type selects one type ("" for all).
	Type schemas.EventType
	// After starts after the event at this sequence: the Seq of the last
	// event the caller handled and stored. Resumed from there, no event is
	// missed and none is handed over twice, across the caller's restarts.
	After uint64
	// Since, when After is 0, starts at the first event stored at or after
	// it; zero starts at the stream's first.
	Since time.Time
	// Follow goes on after the end of the stream, handing over events as
	// they are stored, until ctx ends (then Events returns nil). Without
	// it, Events stops at the end of the stream as it was when it began.
	Follow bool
}

// ParseEventType accepts a type in any letter case, or "" for all.
func ParseEventType(s string) (schemas.EventType, error) {
	if s == "" {
		return "", nil
	}
	for _, t := range schemas.EventTypes {
		if strings.EqualFold(string(t), s) {
			return t, nil
		}
	}
	return "", errorOf(ErrInvalid, nil, "--type %q: want one of %s", s, EventTypeList())
}

// EventTypeList names the event types, comma-separated.
func EventTypeList() string {
	names := make([]string, len(schemas.EventTypes))
	for i, t := range schemas.EventTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// Events hands fn the events that opts select, in stream order, each once,
// through an ordered consumer deleted when done. An error from fn ends the
// read with that error: the caller's stored position is then the last event
// it handled. It is how an auditor follows the fleet:
//
//	pos := load() // 0 the first time
//	err := c.Events(ctx, client.EventsOptions{After: pos, Follow: true}, func(e *client.Event) error {
//		if err := ledger.Write(e.Raw); err != nil {
//			return err
//		}
//		return store(e.Seq)
//	})
func (c *Client) Events(ctx context.Context, opts EventsOptions, fn func(*Event) error) error {
	typ := opts.Type
	if typ == "" {
		typ = "*"
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	switch {
	case opts.After > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, opts.After+1
	case !opts.Since.IsZero():
		since := opts.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cfg.FilterSubjects = []string{c.subj.Event(nodeToken(opts.Node), "*", typ)}
	if opts.Pod != nil {
		var err error
		if cfg.FilterSubjects, err = c.podEventFilters(ctx, opts.Node, *opts.Pod, typ); err != nil {
			return err
		}
	}
	return c.readStream(ctx, schemas.StreamEvents, cfg, opts.Follow, func(msg jetstream.Msg) error {
		e := &Event{Raw: msg.Data()}
		if md, err := msg.Metadata(); err == nil {
			e.Seq = md.Sequence.Stream
		}
		if json.Unmarshal(msg.Data(), &e.LifecycleEvent) != nil {
			return nil // not an event this client can read
		}
		return fn(e)
	})
}

// podEventFilters are the event subjects of every uid ref names (on node,
// or on any node).
func (c *Client) podEventFilters(ctx context.Context, node string, ref PodRef, typ schemas.EventType) ([]string, error) {
	if ref.UID != "" {
		// A uid is enough: no need to know its node.
		return []string{c.subj.Event(nodeToken(node), ref.UID, typ)}, nil
	}
	pods, err := c.FindPods(ctx, node, ref)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, PodNotFound(ref, node)
	}
	var filters []string
	for _, p := range pods {
		f := c.subj.Event(p.Node, p.UID, typ)
		if !slices.Contains(filters, f) {
			filters = append(filters, f)
		}
	}
	return filters, nil
}
