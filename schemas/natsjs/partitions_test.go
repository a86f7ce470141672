package natsjs_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/natstest"
)

// Intents sharded into three streams: published on the contract's subject,
// each lands in its node's partition, stored under the subject it was
// published on, where the node's filter and a read by subject find it; the
// message id still deduplicates.
func TestPartitionedIntentsLandInTheirNodesStream(t *testing.T) {
	const n = 3
	srv := natstest.RunServer(t)
	natstest.MapIntentPartitions(t, srv, schemas.DefaultSubjectPrefix, n)
	_, js := natstest.Connect(t, srv)
	ctx := t.Context()
	cfg := natsjs.StreamsConfig{Storage: jetstream.MemoryStorage, IntentPartitions: n}
	cfg.SetDefaults()
	if err := natsjs.Provision(ctx, js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	subj := schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}
	used := map[string]bool{}
	for i := range 12 {
		node := fmt.Sprintf("n%d", i)
		want := schemas.IntentsStream(node, n)
		used[want] = true
		subject := subj.Intent(node, "pod-a")
		ack, err := js.Publish(ctx, subject, []byte(`{}`), jetstream.WithMsgID(node+"-1"), jetstream.WithExpectStream(want))
		if err != nil {
			t.Fatalf("publish %s, expecting stream %s: %v", subject, want, err)
		}
		if again, err := js.Publish(ctx, subject, []byte(`{}`), jetstream.WithMsgID(node+"-1")); err != nil || !again.Duplicate || again.Sequence != ack.Sequence {
			t.Errorf("%s published again with its message id: %+v, %v; want the duplicate of %d", subject, again, err, ack.Sequence)
		}
		s, err := js.Stream(ctx, want)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := s.GetLastMsgForSubject(ctx, subject); err != nil || m.Sequence != ack.Sequence {
			t.Errorf("stream %s, last message on %s: %v, %v; want sequence %d", want, subject, m, err, ack.Sequence)
		}
		cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj.NodeIntents(node)}})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil || msg.Subject() != subject {
			t.Fatalf("node %s's filter on %s: %v, %v; want the intent on %s", node, want, msg, err, subject)
		}
	}
	if len(used) != n {
		t.Errorf("12 nodes used partitions %v; want all %d", used, n)
	}
	if got, err := natsjs.IntentPartitions(ctx, js); got != n || err != nil {
		t.Errorf("IntentPartitions = %d, %v; want %d", got, err, n)
	}
}

// A fleet's intents stay where they are: provisioning another number of
// partitions is refused, saying the number they have.
func TestProvisionRefusesOtherIntentPartitions(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ctx := t.Context()
	for _, step := range []struct{ have, ask int }{{1, 4}, {4, 1}, {4, 2}} {
		t.Run(fmt.Sprintf("%d-to-%d", step.have, step.ask), func(t *testing.T) {
			for _, name := range append(schemas.IntentsStreams(1), schemas.IntentsStreams(4)...) {
				_ = js.DeleteStream(ctx, name)
			}
			have := natsjs.StreamsConfig{Storage: jetstream.MemoryStorage, IntentPartitions: step.have}
			have.SetDefaults()
			if err := natsjs.Provision(ctx, js, have, zerolog.Nop()); err != nil {
				t.Fatal(err)
			}
			ask := have
			ask.IntentPartitions = step.ask
			err := natsjs.Provision(ctx, js, ask, zerolog.Nop())
			if !errors.Is(err, natsjs.ErrIntentPartitions) {
				t.Fatalf("provision %d partitions over %d: %v; want ErrIntentPartitions", step.ask, step.have, err)
			}
			t.Log(err)
			if got, err := natsjs.IntentPartitions(ctx, js); got != step.have || err != nil {
				t.Errorf("IntentPartitions = %d, %v; want %d", got, err, step.have)
			}
		})
	}
}
