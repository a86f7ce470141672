package scale_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/consumer"
	"github.com/jetlet/jetlet/consumer/results"
	"github.com/jetlet/jetlet/consumer/status"
	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/reconcile/pleg"
	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/fakecri"
)

// simNode is one jetlet node in the benchmark's process: the pipeline of
// cmd/jetlet (publisher, relist, pod workers, consumer, heartbeat) with
// their defaults, on its own NATS connection, over an in-memory runtime.
type simNode struct {
	name string
	cons *consumer.Consumer
}

// pulling reports whether the node's durable consumer has a pull request of
// the node's waiting.
func (n *simNode) pulling(ctx context.Context, js jetstream.JetStream) bool {
	if !n.cons.Attached() {
		return false
	}
	c, err := js.Consumer(ctx, schemas.IntentsStream(n.name, *partitions), natsjs.DurableName(n.name))
	if err != nil {
		return false
	}
	info, err := c.Info(ctx)
	return err == nil && info.NumWaiting > 0
}

// drain bounds a node's shutdown at the end of the benchmark.
const drain = 5 * time.Second

// startNode wires node's pipeline as cmd/jetlet's servePipeline does, runs it
// until the benchmark ends, and stops it then.
func startNode(b *testing.B, urls, user, password, name string) *simNode {
	b.Helper()
	// Pings as jetlet run's defaults (--nats-ping-interval 1s,
	// --nats-max-pings-out 2): part of what an idle node costs the servers.
	nc, err := nats.Connect(urls, nats.Name("jetlet-"+name), nats.UserInfo(user, password),
		nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.PingInterval(time.Second), nats.MaxPingsOutstanding(2))
	if err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	// Warnings only: at 100 nodes anything louder drowns the figures.
	log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Str("node", name).Logger()
	answers, err := results.New(js, results.Config{Node: name})
	if err != nil {
		b.Fatal(err)
	}
	pub, err := events.New(js, events.Config{Node: name, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	statuses, err := status.New(js, status.Config{Node: name, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	emit := podworkers.IntentEmitter(pub)
	mgr, err := reconcile.New(fakecri.New(), emit, reconcile.Config{NodeName: name, DataDir: b.TempDir(), Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	relister, err := pleg.New(mgr, pub, pleg.Config{Node: name, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	workers, err := podworkers.New(mgr, relister, emit, statuses, podworkers.Config{Node: name, Logger: log})
	if err != nil {
		b.Fatal(err)
	}
	cons, err := consumer.New(js, answers, pub, workers, consumer.Config{Node: name, IntentsStream: schemas.IntentsStream(name, *partitions), Logger: log, DurableReplicas: *durableReplicas, DurableInMemory: *durableReplicas == 1})
	if err != nil {
		b.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	// The publishers outlive the consumer and workers, so that their drain
	// still publishes, as in servePipeline.
	pubCtx, stopPub := context.WithCancel(context.Background())
	var bg, syncing sync.WaitGroup
	bg.Go(func() { pub.Run(pubCtx) })
	bg.Go(func() { statuses.Run(pubCtx) })
	bg.Go(func() { relister.Run(ctx) })
	bg.Go(func() {
		status.RunHeartbeat(ctx, js, status.HeartbeatPeriod, func() schemas.NodeRecord {
			return schemas.NodeRecord{Node: name, RuntimeName: "fakecri", Pods: workers.PodCounts()}
		}, nil, log)
	})
	syncing.Go(func() { workers.Run(ctx, drain) })
	syncing.Go(func() {
		if err := cons.Run(ctx, drain); err != nil {
			b.Errorf("node %s: consumer: %v", name, err)
		}
	})
	b.Cleanup(func() {
		stop()
		syncing.Wait()
		stopPub()
		bg.Wait()
		nc.Close()
	})
	return &simNode{name: name, cons: cons}
}
