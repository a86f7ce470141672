package results_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/consumer/results"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
)

// New checks its config with natsjs.Prepare (whose test has the cases).
func TestNewRefusesNoJetStreamAndABadPrefix(t *testing.T) {
	if _, err := results.New(nil, results.Config{Node: "n1"}); !errors.Is(err, results.ErrInvalidConfig) {
		t.Errorf("New without JetStream: %v, want ErrInvalidConfig", err)
	}
	js := struct{ jetstream.JetStream }{}
	if _, err := results.New(js, results.Config{Node: "n1", SubjectPrefix: "a.b"}); !errors.Is(err, results.ErrInvalidConfig) {
		t.Errorf("New with a prefix of two tokens: %v, want ErrInvalidConfig", err)
	}
}

func TestPublishResultIsStoredOncePerIntent(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	jetlettest.Provision(t, js)
	p, err := results.New(js, results.Config{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	// The intent's trace context, as the consumer takes it from its headers.
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	intent := nats.Header{}
	intent.Set("traceparent", traceparent)
	ctx := natsjs.ExtractTrace(context.Background(), intent)
	r := &schemas.SyncResult{Node: "n1", UID: "u1", IntentSeq: 42, Outcome: schemas.OutcomeSynced, Op: schemas.OpApply}
	for range 2 { // a redelivered intent answered twice
		if err := p.PublishResult(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	stream, _ := js.Stream(t.Context(), schemas.StreamResults)
	info, _ := stream.Info(t.Context())
	if info.State.Msgs != 1 {
		t.Fatalf("%d results stored, want 1", info.State.Msgs)
	}
	m, err := stream.GetLastMsgForSubject(t.Context(), "jetlet.result.n1.u1")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get("Nats-Msg-Id"); got != "n1.42" {
		t.Errorf("Nats-Msg-Id = %q, want n1.42", got)
	}
	if got := m.Header.Get("Jetlet-Intent-Seq"); got != "42" {
		t.Errorf("Jetlet-Intent-Seq = %q, want 42", got)
	}
	if got := m.Header.Get("traceparent"); got != traceparent {
		t.Errorf("traceparent = %q, want %q", got, traceparent)
	}
	var got schemas.SyncResult
	if err := json.Unmarshal(m.Data, &got); err != nil {
		t.Fatal(err)
	}
	if got.APIVersion != schemas.APIVersion || got.Kind != schemas.KindSyncResult || got.IntentSeq != 42 {
		t.Errorf("stored result %+v", got)
	}
	for _, c := range []struct {
		uid  string
		want map[uint64]bool
	}{
		{"u1", map[uint64]bool{42: true}},
		{"nobody", map[uint64]bool{}},
	} {
		got, err := p.PodAnswered(t.Context(), c.uid)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("PodAnswered(%q) = %v, %v; want %v", c.uid, got, err, c.want)
		}
	}
	for _, c := range []struct {
		since time.Time
		want  map[uint64]bool
	}{
		{time.Time{}, map[uint64]bool{42: true}},
		{time.Now().Add(time.Hour), map[uint64]bool{}},
	} {
		got, err := p.AnsweredSince(t.Context(), c.since)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("AnsweredSince(%v) = %v, %v; want %v", c.since, got, err, c.want)
		}
	}
	if info, err := stream.Info(t.Context()); err != nil || info.State.Consumers != 0 {
		t.Errorf("%s holds %d consumers after the reads (%v), want 0: each counts against the stream's limit", schemas.StreamResults, info.State.Consumers, err)
	}
}

// A copy of a result that the servers hold past the duplicate window (queued
// behind a backlog while the node timed out, answered again and moved on)
// must not be stored: the window forgot its Nats-Msg-Id, but the pod's last
// result is no longer the one the copy expected.
func TestALateCopyOfAResultIsRefusedAtAnyAge(t *testing.T) {
	nc, js := natstest.Connect(t, natstest.RunServer(t))
	jetlettest.Provision(t, js, func(c *natsjs.StreamsConfig) { c.DuplicateWindow = time.Second })
	// The copies exactly as the node sent them, seen on the wire.
	sent, err := nc.SubscribeSync("jetlet.result.n1.u1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := results.New(js, results.Config{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	answer := func(p *results.ResultPublisher, seq uint64) {
		t.Helper()
		r := &schemas.SyncResult{Node: "n1", UID: "u1", IntentSeq: seq, Outcome: schemas.OutcomeSynced, Op: schemas.OpApply}
		if err := p.PublishResult(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	answer(p, 42)
	first, err := sent.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	jetlettest.WaitDuplicateWindow(t, js, "jetlet.result.n1.probe", 30*time.Second)

	// The late copy arrives, alone and then after the pod's next result.
	late := func() error { return jetlettest.Republish(nc, first) }
	if err := late(); !natsjs.WrongLastSequence(err) {
		t.Errorf("a late copy past the window: %v, want refused for its last sequence", err)
	}
	answer(p, 43)
	if err := late(); !natsjs.WrongLastSequence(err) {
		t.Errorf("a late copy after the next result: %v, want refused for its last sequence", err)
	}
	// A restarted node answers 42 again (it found no result for it, reading
	// a lagging replica, say): what is stored says it is answered.
	restarted, err := results.New(js, results.Config{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	answer(restarted, 42)
	answer(restarted, 44)

	stored, err := jetlettest.ReadAll[schemas.SyncResult](js, schemas.StreamResults, "jetlet.result.n1.u1")
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, r := range stored {
		got = append(got, r.IntentSeq)
	}
	if !reflect.DeepEqual(got, []uint64{42, 43, 44}) {
		t.Errorf("results stored for intents %v, want [42 43 44], each once", got)
	}
}
