// Package scale_test measures jetlet at many nodes: a three-server
// JetStream cluster of nats-server processes (test/natscluster, the
// deploy/ configuration), streams at three replicas, and 100 simulated nodes
// in this process, each the real pipeline (consumer, pod workers, relist,
// publisher, heartbeat) on its own connection and durable consumer over an
// in-memory runtime (test/fakecri). A scheduler-like publisher puts 20,000
// intents on them:
//
//	go test -run '^$' -bench Scale100Nodes -benchtime 1x ./test/scale
//
// It reports intents/s, the p50/p99 latency from an intent's publication to
// its result's arrival, and the CPU and memory of the three servers.
// docs/scaling.md reads the figures.
package scale_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/natscluster"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/procstat"
)

var (
	nodeCount       = flag.Int("scale.nodes", 100, "simulated nodes")
	intentCount     = flag.Int("scale.intents", 20000, "intents published, spread evenly over the nodes")
	podsPerNode     = flag.Int("scale.pods", 50, "pods per node; each gets intents/(nodes*pods) revisions, the first creates it, the others re-apply it unchanged")
	window          = flag.Int("scale.window", 200, "intents the publisher lets wait for their result at once, as a scheduler that paces itself on results")
	durableReplicas = flag.Int("scale.durable-replicas", 1, "replicas of each node's durable consumer: 1 in memory on one server (jetlet run's default on replicated streams), 0 the stream's (3, --intake-replicas 0)")
	partitions      = flag.Int("scale.partitions", 1, "streams the intents are sharded into (jetlet run --intent-partitions): the servers map each intent to its node's")
	countMsgs       = flag.Bool("scale.count", false, "count the messages of each kind (JetStream API calls, acks, KV puts, results, events) per intent; the extra subscriber costs the servers CPU")
)

// idleWindow is how long the idle nodes' cost is measured.
const idleWindow = 20 * time.Second

const (
	user          = "jetlet"
	password      = "scale-jetlet-password"
	routePassword = "scale-route-password"
)

func BenchmarkScale100Nodes(b *testing.B) {
	if *intentCount%(*nodeCount**podsPerNode) != 0 {
		b.Fatalf("-scale.intents %d is not a multiple of nodes×pods %d", *intentCount, *nodeCount**podsPerNode)
	}
	cluster := natscluster.Start(b, natscluster.Config{
		File: filepath.Join("..", "..", "deploy", "nats", "nats-server.conf"),
		Includes: map[string]string{
			"routes.conf": fmt.Sprintf("authorization { user: route, password: %q }\n", routePassword),
			"jetlet-auth.conf": intentMappings() + fmt.Sprintf("authorization { users: [ {user: %s, password: %q} ] }\n",
				user, password),
		},
		RouteUser: "route", RoutePassword: routePassword,
	})
	nc := connect(b, cluster.URLs())
	// The publisher's window bounds the intents in flight, not nats.go.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(*window))
	if err != nil {
		b.Fatal(err)
	}
	streams := natsjs.StreamsConfig{Replicas: 3, IntentPartitions: *partitions}
	streams.SetDefaults()
	if err := natsjs.Provision(b.Context(), js, streams, zerolog.Nop()); err != nil {
		b.Fatal(err)
	}
	var pids []int
	for _, s := range cluster.Servers {
		pids = append(pids, serverPID(b, s))
	}
	rss := func() (sum int64) {
		for _, pid := range pids {
			sum += procstat.RSS(b, pid)
		}
		return sum
	}
	rssBefore := rss()

	nodes := make([]*simNode, *nodeCount)
	for i := range nodes {
		nodes[i] = startNode(b, cluster.URLs(), user, password, nodeName(i))
	}
	// Ready once each durable consumer has a leader and holds the node's pull.
	waiting := 0
	poll.Until(b, 5*time.Minute, func() string {
		return fmt.Sprintf("every node pulling from its durable consumer (%d of %d are)", waiting, len(nodes))
	}, func() bool {
		waiting = 0
		for _, n := range nodes {
			if n.pulling(b.Context(), js) {
				waiting++
			}
		}
		return waiting == len(nodes)
	})
	rssNodes := rss()
	// What the idle nodes cost the servers (pull heartbeats, node heartbeats,
	// relists): a window with no intents.
	cpu0, self0 := sumCPU(b, pids), selfCPU(b)
	time.Sleep(idleWindow)
	idleServer, idleNodes := sumCPU(b, pids)-cpu0, selfCPU(b)-self0

	if b.N != 1 {
		b.Fatalf("b.N %d: the benchmark runs once (-benchtime 1x), its first phase creates the pods", b.N)
	}
	var counts *msgCounter
	if *countMsgs {
		counts = countMessages(b, nc)
	}
	l := newLoad(b, js)
	// The first revision of every pod creates it; the later ones find it
	// converged. Each phase is measured on its own, and both together.
	pods := *nodeCount * *podsPerNode
	phases := []struct {
		name     string
		from, to int
	}{{"create", 0, pods}, {"reapply", pods, *intentCount}}
	var total phaseResult
	// The figures are only as good as the CPU the run had: say what else ran.
	b.Logf("load average before: %s", loadAverage(b))
	b.ResetTimer()
	for _, ph := range phases {
		if ph.from >= ph.to {
			continue // one revision per pod: nothing to re-apply
		}
		if counts != nil {
			counts.reset()
		}
		cpu0, self0 := sumCPU(b, pids), selfCPU(b)
		r := l.run(ph.from, ph.to)
		r.serverCPU, r.nodesCPU = sumCPU(b, pids)-cpu0, selfCPU(b)-self0
		r.report(b, ph.name+"-")
		if counts != nil {
			b.Logf("%s: messages per intent: %s", ph.name, counts.perIntent(len(r.latencies)))
		}
		total.add(r)
	}
	b.StopTimer()
	b.Logf("load average after: %s", loadAverage(b))
	total.report(b, "")
	b.ReportMetric(100*total.serverCPU.Seconds()/total.elapsed.Seconds(), "server-cpu-%")
	b.ReportMetric(total.serverCPU.Seconds(), "server-cpu-s")
	b.ReportMetric(total.nodesCPU.Seconds(), "nodes-cpu-s")
	b.ReportMetric(100*idleServer.Seconds()/idleWindow.Seconds(), "idle-server-cpu-%")
	b.ReportMetric(100*idleNodes.Seconds()/idleWindow.Seconds(), "idle-nodes-cpu-%")
	b.ReportMetric(float64(rss())/(1<<20), "server-rss-MB")
	b.ReportMetric(float64(rssNodes-rssBefore)/float64(*nodeCount)/(1<<10), "server-rss-KB/node")
	b.Logf("outcomes: %v", l.outcomes)
	logStreams(b, js)
	results, err := js.Stream(b.Context(), schemas.StreamResults)
	if err != nil {
		b.Fatal(err)
	}
	if n := results.CachedInfo().State.Msgs; n != uint64(*intentCount) {
		b.Errorf("%d results stored for %d intents, want exactly one each", n, *intentCount)
	}
}

// phaseResult is what a phase of the load measured.
type phaseResult struct {
	elapsed             time.Duration
	latencies           []time.Duration
	serverCPU, nodesCPU time.Duration
}

func (r *phaseResult) add(o phaseResult) {
	r.elapsed += o.elapsed
	r.latencies = append(r.latencies, o.latencies...)
	r.serverCPU += o.serverCPU
	r.nodesCPU += o.nodesCPU
}

// report reports intents/s, the latency percentiles and the servers' CPU per
// intent, their units prefixed with prefix.
func (r phaseResult) report(b *testing.B, prefix string) {
	lat := slices.Sorted(slices.Values(r.latencies))
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(float64(len(lat))/r.elapsed.Seconds(), prefix+"intents/s")
	b.ReportMetric(pct(0.50), prefix+"p50-ms")
	b.ReportMetric(pct(0.99), prefix+"p99-ms")
	b.ReportMetric(float64(r.serverCPU.Microseconds())/float64(len(lat)), prefix+"server-cpu-µs/intent")
}

func nodeName(i int) string { return fmt.Sprintf("node-%03d", i) }

func connect(b testing.TB, urls string) *nats.Conn {
	b.Helper()
	nc, err := nats.Connect(urls, nats.UserInfo(user, password), nats.MaxReconnects(-1))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc
}

func sumCPU(b *testing.B, pids []int) (sum time.Duration) {
	for _, pid := range pids {
		self, _ := procstat.CPU(b, pid)
		sum += self
	}
	return sum
}

// load is the scheduler: it publishes intents, at most window of them
// waiting for their result at once, and times each from its publication to
// its result's arrival.
type load struct {
	b        *testing.B
	js       jetstream.JetStream
	mu       sync.Mutex              // guards the fields below, written by the acknowledgement goroutines and the results subscription
	sent     map[intentKey]time.Time // intent → publication began
	answered map[intentKey]time.Time // intent → its first result arrived, over every phase
	got      int                     // intents of the phase answered
	outcomes map[schemas.Outcome]int
	slots    chan struct{} // one per intent awaiting its result
	done     chan struct{} // closed when every intent of the phase is answered
	want     int
	last     time.Time
}

func newLoad(b *testing.B, js jetstream.JetStream) *load {
	l := &load{b: b, js: js, answered: map[intentKey]time.Time{}, outcomes: map[schemas.Outcome]int{}}
	// Results are read from the stream, which loses none, even when this
	// client is cut off as a slow consumer.
	stream, err := js.Stream(b.Context(), schemas.StreamResults)
	if err != nil {
		b.Fatal(err)
	}
	oc, err := stream.OrderedConsumer(b.Context(), jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy})
	if err != nil {
		b.Fatal(err)
	}
	cc, err := oc.Consume(l.answer)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cc.Stop)
	return l
}

// intentKey is an intent: its sequence in its stream, one of several when
// the intents are partitioned.
type intentKey struct {
	stream string
	seq    uint64
}

// answer takes a result from the stream; its time is when it was stored.
func (l *load) answer(m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		l.b.Errorf("result on %s: %v", m.Subject(), err)
		return
	}
	at := meta.Timestamp
	seq, err := strconv.ParseUint(m.Headers().Get(schemas.HeaderIntentSeq), 10, 64)
	if err != nil {
		l.b.Errorf("result on %s without %s: %v", m.Subject(), schemas.HeaderIntentSeq, err)
		return
	}
	var r struct {
		Node    string          `json:"node"`
		Outcome schemas.Outcome `json:"outcome"`
	}
	if err := json.Unmarshal(m.Data(), &r); err != nil {
		l.b.Errorf("result on %s: %v", m.Subject(), err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	key := intentKey{schemas.IntentsStream(r.Node, *partitions), seq}
	if _, dup := l.answered[key]; dup {
		// Stored twice: the contract's exactly-once failed (counted at the
		// end, by logStreams' figures).
		return
	}
	l.answered[key] = at
	l.outcomes[r.Outcome]++
	l.last = at
	l.got++
	<-l.slots
	if l.got == l.want {
		close(l.done)
	}
}

// run publishes intents from to to (exclusive) of the benchmark's sequence
// and waits for every result.
func (l *load) run(from, to int) phaseResult {
	l.mu.Lock()
	l.sent = make(map[intentKey]time.Time, to-from)
	l.got = 0
	l.slots = make(chan struct{}, *window)
	l.done = make(chan struct{})
	l.want = to - from
	done := l.done
	l.mu.Unlock()

	ctx, cancel := context.WithTimeout(l.b.Context(), 15*time.Minute)
	defer cancel()
	start := time.Now()
	var acks sync.WaitGroup
	for i := from; i < to && ctx.Err() == nil; i++ {
		// Revision-major, then pod, then node: every node gets work at
		// once, and a pod's revisions are far apart in the order.
		rev := i/(*nodeCount**podsPerNode) + 1
		pod, node := i/(*nodeCount)%*podsPerNode, i%*nodeCount
		l.publish(ctx, &acks, nodeName(node), fmt.Sprintf("%s-pod-%03d", nodeName(node), pod), rev)
	}
	acks.Wait()
	select {
	case <-done:
	case <-ctx.Done():
		l.mu.Lock()
		n := l.got
		l.mu.Unlock()
		l.b.Fatalf("%d of %d intents answered after %s", n, to-from, time.Since(start).Round(time.Second))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r := phaseResult{elapsed: l.last.Sub(start)}
	for key, sent := range l.sent {
		at, ok := l.answered[key]
		if !ok {
			l.b.Fatalf("intent %d of %s has no result", key.seq, key.stream)
		}
		r.latencies = append(r.latencies, at.Sub(sent))
	}
	return r
}

// publish stores one intent without waiting for JetStream's acknowledgement,
// once a slot is free; acks waits for the acknowledgement. An intent not
// acknowledged is published again, each try bounded by publishTimeout: its
// message id makes a retried intent that was stored a duplicate.
func (l *load) publish(ctx context.Context, acks *sync.WaitGroup, node, uid string, rev int) {
	select {
	case l.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	subj := schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}
	// A new message per try: a published one carries its try's reply inbox.
	msg := func() *nats.Msg {
		m := nats.NewMsg(subj.Intent(node, uid))
		m.Data = []byte(podJSON(uid, rev))
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("scale.%s.%s.%d", node, uid, rev))
		return m
	}
	began := time.Now()
	f, err := l.js.PublishMsgAsync(msg())
	acks.Go(func() {
		var ack *jetstream.PubAck
		if err == nil {
			select {
			case ack = <-f.Ok():
			case <-f.Err():
			case <-ctx.Done():
				return
			}
		}
		for ack == nil && ctx.Err() == nil {
			try, cancel := context.WithTimeout(ctx, publishTimeout)
			ack, _ = l.js.PublishMsg(try, msg())
			cancel()
		}
		if ack != nil {
			l.mu.Lock()
			l.sent[intentKey{ack.Stream, ack.Sequence}] = began
			l.mu.Unlock()
		}
	})
}

// publishTimeout bounds one try of a retried intent.
const publishTimeout = 10 * time.Second

// podJSON is an apply intent with the same spec at every revision: the first
// creates the pod, the others find it converged.
func podJSON(uid string, rev int) string {
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":%d,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"},
	    "spec":{"restartPolicy":"Always","terminationGracePeriodSeconds":2,
	      "containers":[{"name":"app","image":"busybox:1.36","command":["/bin/sh","-c","exec sleep 86400"]}]}}}`,
		rev, uid, uid)
}

// logStreams logs what each stream and bucket holds, for docs/scaling.md's
// sizes.
func logStreams(b *testing.B, js jetstream.JetStream) {
	b.Helper()
	for name := range js.StreamNames(b.Context()).Name() {
		s, err := js.Stream(b.Context(), name)
		if err != nil {
			b.Fatal(err)
		}
		info, err := s.Info(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%-16s msgs %6d  bytes %9d  subjects %6d  consumers %4d", name, info.State.Msgs, info.State.Bytes, info.State.NumSubjects, info.State.Consumers)
	}
}

// intentMappings is the servers' subject mapping of -scale.partitions, as
// `jetlet nats-config --intent-partitions` writes it.
func intentMappings() string {
	if *partitions <= 1 {
		return ""
	}
	src, dest := schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}.IntentPartitionMapping(*partitions)
	return fmt.Sprintf("mappings { %q: %q }\n", src, dest)
}
