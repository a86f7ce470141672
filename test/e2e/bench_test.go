package e2e_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/otlptest"
)

// The pipeline benchmarks measure jetlet end to end, from an intent
// published to its result received, beside a bare JetStream
// consume-publish-ack loop run against the same server in the same run:
//
//	go test -run '^$' -bench . -benchtime 5000x ./test/e2e
//
// Each reports intents/s and the p50/p99 latency of both, and their ratios.

// noOpPods is how many converged pods the no-op benchmarks spread their
// intents over (so that few are coalesced): 200, or JETLET_NOOP_PODS (CI's
// performance stage starts fewer: their start is most of the load's time).
func noOpPods(b *testing.B) int {
	v := os.Getenv("JETLET_NOOP_PODS")
	if v == "" {
		return 200
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 999 {
		b.Fatalf("JETLET_NOOP_PODS=%q: want a number of pods from 1 to 999", v)
	}
	return n
}

// intentHistory is the intents of each pod the no-op benchmarks' node keeps.
const intentHistory = 64

// convergedNode runs jetlet, with env added to its environment, with
// noOpPods running pods, all converged; it returns how many.
func convergedNode(b *testing.B, env []string) (*node, int) {
	b.Helper()
	benchPods := noOpPods(b)
	if b.N > intentHistory*benchPods {
		b.Fatalf("%d intents over %d pods: more than the %d a pod's subject keeps; more pods (JETLET_NOOP_PODS), or fewer intents", b.N, benchPods, intentHistory)
	}
	// A flood puts up to count/benchPods intents on each pod's subject before
	// jetlet reads them: keep them all (the default history of 16 would let
	// JetStream discard the oldest unread, which then get no result).
	// --max-pods above benchPods: past kubelet's 110 the rest would be
	// refused at admission, and each of their intents measured a refusal.
	n := startNodeEnv(b, shortDir(b), "", env, "--workers", "16", "--intent-history", strconv.Itoa(intentHistory), "--max-pods", strconv.Itoa(benchPods))
	for i := range benchPods {
		uid := fmt.Sprintf("bench-%03d", i)
		n.publish(uid, podJSON(uid, 1, "Always", "exec sleep 3600"))
	}
	for _, r := range waitMsgs[schemas.SyncResult](b, n.js, schemas.StreamResults, "jetlet.result.n1.>", benchPods, 5*time.Minute) {
		if r.Outcome != schemas.OutcomeSynced {
			b.Fatalf("pod %s not started: %s %s", r.UID, r.Outcome, r.Error)
		}
	}
	return n, benchPods
}

// loadResult is what one run of a load measured.
type loadResult struct {
	elapsed   time.Duration // from the first publish until every answer was in
	perSecond float64
	p50, p99  time.Duration
}

// runLoad publishes count messages built by body to subject(i), at rate per
// second (0: as fast as possible), and waits for each one's answer on the
// core subscription answers, which yields the stream sequence it answers.
func runLoad(b *testing.B, js jetstream.JetStream, nc *nats.Conn, count, rate int, subject func(i int) string, body func(i int) []byte, answers string, answeredSeq func(*nats.Msg) uint64) loadResult {
	b.Helper()
	var mu sync.Mutex
	sent := make(map[uint64]time.Time, count)
	got := make(map[uint64]time.Time, count)
	done := make(chan struct{})
	sub, err := nc.Subscribe(answers, func(m *nats.Msg) {
		seq := answeredSeq(m)
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if _, dup := got[seq]; dup || seq == 0 {
			return
		}
		got[seq] = now
		if len(got) == count {
			close(done)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	_ = sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil { // the server knows the subscription before anything is sent
		b.Fatal(err)
	}

	start := time.Now()
	var interval time.Duration
	if rate > 0 {
		interval = time.Second / time.Duration(rate)
	}
	futures := make([]jetstream.PubAckFuture, 0, count)
	times := make([]time.Time, 0, count)
	for i := range count {
		if interval > 0 {
			if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
				time.Sleep(d) // pacing the offered load
			}
		}
		times = append(times, time.Now())
		f, err := js.PublishAsync(subject(i), body(i))
		if err != nil {
			b.Fatal(err)
		}
		futures = append(futures, f)
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			mu.Lock()
			sent[ack.Sequence] = times[i]
			mu.Unlock()
		case err := <-f.Err():
			b.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		mu.Lock()
		b.Fatalf("%d of %d answered", len(got), count)
	}
	elapsed := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	lat := make([]time.Duration, 0, count)
	for seq, t := range sent {
		if r, ok := got[seq]; ok {
			lat = append(lat, r.Sub(t))
		}
	}
	slices.Sort(lat)
	return loadResult{
		elapsed:   elapsed,
		perSecond: float64(count) / elapsed.Seconds(),
		p50:       lat[len(lat)/2],
		p99:       lat[len(lat)*99/100],
	}
}

// bareLoop runs, against the same server, the least a consumer of intents
// can do: a durable pull consumer whose workers publish one answer per
// message (awaiting its PubAck) and then ack it. It returns a function that
// stops it.
func bareLoop(b *testing.B, js jetstream.JetStream, workers int) func() {
	b.Helper()
	ctx := context.Background()
	_ = js.DeleteStream(ctx, "BENCH")
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"}})
	if err != nil {
		b.Fatal(err)
	}
	cons, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "bare", FilterSubject: "bench.in.>", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 4096,
	})
	if err != nil {
		b.Fatal(err)
	}
	work := make(chan jetstream.Msg, 4096)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for m := range work {
				meta, _ := m.Metadata()
				out := nats.NewMsg("bench.out")
				out.Data = m.Data()
				out.Header.Set(schemas.HeaderIntentSeq, strconv.FormatUint(meta.Sequence.Stream, 10))
				if _, err := js.PublishMsg(ctx, out); err != nil {
					_ = m.Nak()
					continue
				}
				_ = m.Ack()
			}
		})
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { work <- m })
	if err != nil {
		b.Fatal(err)
	}
	return func() { cc.Stop(); close(work); wg.Wait() }
}

func intentSeqOf(m *nats.Msg) uint64 {
	seq, _ := strconv.ParseUint(m.Header.Get(schemas.HeaderIntentSeq), 10, 64)
	return seq
}

func report(b *testing.B, jetlet, bare loadResult) {
	b.ReportMetric(jetlet.perSecond, "intents/s")
	b.ReportMetric(bare.perSecond, "bare-msgs/s")
	b.ReportMetric(jetlet.perSecond/bare.perSecond, "throughput-ratio")
	b.ReportMetric(float64(jetlet.p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(jetlet.p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(bare.p50.Microseconds())/1000, "bare-p50-ms")
	b.ReportMetric(float64(bare.p99.Microseconds())/1000, "bare-p99-ms")
	b.ReportMetric(float64(jetlet.p99)/float64(bare.p99), "p99-ratio")
	b.ReportMetric(0, "ns/op") // the figures above are the result
}

// BenchmarkNoOpIntents floods jetlet with intents for converged pods (each
// sync finds nothing to do) and the bare loop with as many messages.
func BenchmarkNoOpIntents(b *testing.B) { benchNoOp(b, 0, nil) }

// BenchmarkNoOpIntentsAt5000 offers 5,000 intents/s for converged pods, and
// as many messages to the bare loop.
func BenchmarkNoOpIntentsAt5000(b *testing.B) { benchNoOp(b, 5000, nil) }

// BenchmarkNoOpIntentsAt1000 and BenchmarkNoOpIntentsAt1000Traced measure
// what exporting traces adds to a no-op sync: the same load, without and
// with an OTLP endpoint (a receiver in this process, over gRPC) that every
// intent's trace is exported to.
func BenchmarkNoOpIntentsAt1000(b *testing.B) { benchNoOp(b, 1000, nil) }

func BenchmarkNoOpIntentsAt1000Traced(b *testing.B) {
	_, endpoint := otlptest.StartGRPC(b)
	benchNoOp(b, 1000, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=grpc"})
}

var revision struct {
	sync.Mutex
	next int64
}

func benchNoOp(b *testing.B, rate int, env []string) {
	if probeRun(b) {
		return
	}
	n, benchPods := convergedNode(b, env)
	nc := natsConn(b, n)
	stop := bareLoop(b, n.js, 16)
	defer stop()
	payload := []byte(podJSON("x", 1, "Always", "exec sleep 3600"))
	b.ResetTimer()
	bare := runLoad(b, n.js, nc, b.N, rate,
		func(i int) string { return fmt.Sprintf("bench.in.%d", i%benchPods) },
		func(int) []byte { return payload },
		"bench.out", intentSeqOf)
	revision.Lock()
	base := revision.next + 2
	revision.next = base + int64(b.N)
	revision.Unlock()
	cost := costOf(b, n)
	end := profileLoad(b, n, "noop")
	jet := runLoad(b, n.js, nc, b.N, rate,
		func(i int) string { return fmt.Sprintf("jetlet.intent.n1.bench-%03d", i%benchPods) },
		func(i int) []byte {
			uid := fmt.Sprintf("bench-%03d", i%benchPods)
			return []byte(podJSON(uid, base+int64(i), "Always", "exec sleep 3600"))
		},
		"jetlet.result.n1.>", intentSeqOf)
	b.StopTimer()
	end()
	cost.report(b, n, b.N, "intent")
	report(b, jet, bare)
}

// BenchmarkNewPods sends intents for pods that do not exist yet: each sync
// creates a sandbox and starts a container on the embedded runtime.
func BenchmarkNewPods(b *testing.B) {
	if b.N > 1000 {
		b.Skipf("%d pods would be %d host processes: run with -benchtime 300x", b.N, 2*b.N)
	}
	n := startNode(b, shortDir(b), "", "--workers", "16")
	nc := natsConn(b, n)
	stop := bareLoop(b, n.js, 16)
	defer stop()
	payload := []byte(podJSON("x", 1, "Always", "exec sleep 3600"))
	b.ResetTimer()
	bare := runLoad(b, n.js, nc, b.N, 0,
		func(i int) string { return fmt.Sprintf("bench.in.%d", i) },
		func(int) []byte { return payload },
		"bench.out", intentSeqOf)
	jet := runLoad(b, n.js, nc, b.N, 0,
		func(i int) string { return fmt.Sprintf("jetlet.intent.n1.new-%05d", i) },
		func(i int) []byte { return []byte(podJSON(fmt.Sprintf("new-%05d", i), 1, "Always", "exec sleep 3600")) },
		"jetlet.result.n1.>", intentSeqOf)
	b.StopTimer()
	report(b, jet, bare)
}

func natsConn(b *testing.B, n *node) *nats.Conn {
	b.Helper()
	url, auth := n.url, nats.Option(func(*nats.Options) error { return nil })
	if url == "" {
		url, auth = n.proc.NATSURL(), n.proc.NATSAuth()
	}
	nc, err := nats.Connect(url, auth)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc
}
