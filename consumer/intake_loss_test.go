package consumer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/consumer"
	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/natscluster"
	"github.com/jetlet/jetlet/test/poll"
)

// startLossRig starts three nats-servers, provisions the streams and runs node n1's
// consumer on it with a durable kept in memory on one server. It returns
// how to count the stored results by intent sequence and how to publish
// intents u<from>..u<to-1>, as a scheduler does: retried, with its message
// id, while the stream elects a leader.
func startLossRig(t *testing.T) (*natscluster.Cluster, jetstream.JetStream, func() map[uint64]int, func(from, to int)) {
	cluster := natscluster.Start(t, natscluster.Config{
		File:     filepath.Join("..", "deploy", "nats", "nats-server.conf"),
		Includes: map[string]string{"routes.conf": "", "jetlet-auth.conf": ""},
	})
	nc, err := nats.Connect(cluster.URLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	streams := natsjs.StreamsConfig{Replicas: 3}
	streams.SetDefaults()
	// Healthy servers may not all be known to the meta leader yet: a
	// replicated stream's placement finds "no suitable peers" until they are.
	var provisionErr error
	poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("the streams provisioned; last: %v", provisionErr) }, func() bool {
		provisionErr = natsjs.Provision(t.Context(), js, streams, zerolog.Nop())
		return provisionErr == nil
	})
	h := &harness{t: t, nc: nc, js: js, sync: newFakeSyncer()}
	res := newResults(t, js)
	pub, err := events.New(js, events.Config{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := consumer.New(js, res, pub, h.sync, consumer.Config{Node: "n1", DurableReplicas: 1, DurableInMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { pub.Run(ctx) })
	wg.Go(func() {
		if err := c.Run(ctx, 10*time.Second); err != nil {
			t.Errorf("consumer: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	poll.Until(t, time.Minute, poll.Msg("the consumer to attach"), c.Attached)

	publish := func(from, to int) {
		for i := from; i < to; i++ {
			uid := fmt.Sprintf("u%d", i)
			var err error
			poll.Until(t, time.Minute, func() string { return fmt.Sprintf("intent for %s stored (%v)", uid, err) }, func() bool {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
				defer cancel()
				_, err = js.Publish(ctx, "jetlet.intent.n1."+uid, podIntent(uid, 1), jetstream.WithMsgID(uid))
				return err == nil
			})
		}
	}
	// Results counted with direct gets: a reader's consumer on the server
	// to be lost would stall the reads.
	answers := func() map[uint64]int {
		n := map[uint64]int{}
		_, err := natsjs.ReadStored(t.Context(), js, nil, schemas.StreamResults, "jetlet.result.n1.*", time.Time{}, func(m *jetstream.RawStreamMsg) error {
			var r schemas.SyncResult
			if err := json.Unmarshal(m.Data, &r); err != nil {
				return err
			}
			n[r.IntentSeq]++
			return nil
		})
		if err != nil {
			return nil
		}
		return n
	}
	return cluster, js, answers, publish
}

// leadStreamFrom moves stream's leader to server, as an operator does with
// `nats stream cluster step-down --preferred`.
func leadStreamFrom(t *testing.T, js jetstream.JetStream, stream, server string) {
	t.Helper()
	body := fmt.Sprintf(`{"placement":{"preferred":%q}}`, server)
	poll.Until(t, time.Minute, poll.Msg(stream+" led from "+server), func() bool {
		st, err := js.Stream(t.Context(), stream)
		if err != nil {
			return false
		}
		if st.CachedInfo().Cluster.Leader == server {
			return true
		}
		_, _ = js.Conn().Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(body), 5*time.Second)
		return false
	})
}

// firstThreeAnswered publishes three intents, waits for their results and
// returns the durable consumer as it is then.
func firstThreeAnswered(t *testing.T, js jetstream.JetStream, answers func() map[uint64]int, publish func(from, to int)) *jetstream.ConsumerInfo {
	t.Helper()
	publish(0, 3)
	poll.Until(t, time.Minute, poll.Msg("3 results"), func() bool { return len(answers()) == 3 })
	durable, err := js.Consumer(t.Context(), schemas.StreamIntents, natsjs.DurableName("n1"))
	if err != nil {
		t.Fatal(err)
	}
	return durable.CachedInfo()
}

// wantEachAnsweredOnce waits for results of n intents and fails the test
// for any intent with more than one.
func wantEachAnsweredOnce(t *testing.T, answers func() map[uint64]int, n int) {
	t.Helper()
	var got map[uint64]int
	poll.Until(t, 2*time.Minute, func() string { return fmt.Sprintf("%d results, have %v", n, got) }, func() bool {
		got = answers()
		return len(got) == n
	})
	for seq, count := range got {
		if count != 1 {
			t.Errorf("intent %d has %d results, want 1", seq, count)
		}
	}
}

// A durable consumer kept in memory on one server (DurableInMemory) is
// lost with that server: the node makes it anew on a live one, and every
// intent, before and after the loss, gets exactly one result.
func TestADurableLostWithItsServerIsMadeAnew(t *testing.T) {
	cluster, js, answers, publish := startLossRig(t)
	durable := firstThreeAnswered(t, js, answers, publish)
	host := durable.Cluster.Leader
	// The hard case: the server leads the intents stream too, so the
	// leader that answers for the stream after it never heard from it.
	leadStreamFrom(t, js, schemas.StreamIntents, host)
	cluster.Kill(cluster.Index(host))
	t.Logf("killed %s, the durable consumer's server and the intents stream's leader", host)
	publish(3, 6)

	// One more intent, published after the loss was handled, so that the
	// wait covers the remade consumer's redeliveries too.
	publish(6, 7)
	wantEachAnsweredOnce(t, answers, 7)
	remade, err := js.Consumer(t.Context(), schemas.StreamIntents, natsjs.DurableName("n1"))
	if err != nil {
		t.Fatal(err)
	}
	if on := remade.CachedInfo().Cluster.Leader; on == host {
		t.Errorf("the durable consumer is still on %s, the server lost", on)
	}
}

// A durable consumer kept in memory on one server forgets what was acked
// when that server restarts, and would deliver every intent of the node
// again: the node sees its delivery sequence start again and makes the
// durable anew, no intent answered twice.
func TestADurableThatForgotItsAcksIsMadeAnew(t *testing.T) {
	cluster, js, answers, publish := startLossRig(t)
	durable := firstThreeAnswered(t, js, answers, publish)
	host := cluster.Index(durable.Cluster.Leader)
	created := durable.Created
	cluster.Stop(host)
	cluster.Restart(host)
	cluster.WaitHealthy(time.Minute)
	publish(3, 4)
	wantEachAnsweredOnce(t, answers, 4)
	var now time.Time
	poll.Until(t, time.Minute, func() string { return fmt.Sprintf("the durable made anew (created %v, then %v)", created, now) }, func() bool {
		d, err := js.Consumer(t.Context(), schemas.StreamIntents, natsjs.DurableName("n1"))
		if err != nil {
			return false
		}
		now = d.CachedInfo().Created
		return !now.Equal(created)
	})
}

// A durable consumer whose state moves between file and memory
// (--intake-replicas changed) cannot be updated: it is made anew from the
// first intent not answered, and no intent gets a second result.
func TestAChangedIntakeReplicasMakesTheDurableAnew(t *testing.T) {
	h := newHarness(t)
	stop := h.start(consumer.Config{})
	h.publish("jetlet.intent.n1.u1", podIntent("u1", 1))
	h.publish("jetlet.intent.n1.u2", podIntent("u2", 1))
	h.results(2)
	stop()

	h.start(consumer.Config{DurableReplicas: 1, DurableInMemory: true})
	h.publish("jetlet.intent.n1.u1", podIntent("u1", 2))
	// Its result first: the sentinel's, of another pod, may come before it.
	h.results(3)
	got := h.settledResults()
	if n := resultsOf(got); len(n) != 3 {
		t.Errorf("results per intent %v, want one for each of 3", n)
	}
	for seq, n := range resultsOf(got) {
		if n != 1 {
			t.Errorf("intent %d has %d results, want 1", seq, n)
		}
	}
	durable, err := h.js.Consumer(t.Context(), schemas.StreamIntents, natsjs.DurableName("n1"))
	if err != nil {
		t.Fatal(err)
	}
	if !durable.CachedInfo().Config.MemoryStorage {
		t.Errorf("the durable consumer keeps its state on file, want in memory")
	}
}
