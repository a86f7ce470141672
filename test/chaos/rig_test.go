package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natscluster"
	"github.com/jetlet/jetlet/test/poll"
)

const (
	jetletUser     = "jetlet"
	jetletPassword = "chaos-jetlet-password"
	routePassword  = "chaos-route-password"
	nodes          = 3
	podsPerNode    = 30
)

// rig is the cluster, the jetlet nodes on it and a client connection.
type rig struct {
	t       *testing.T
	cluster *natscluster.Cluster
	procs   []*jetlettest.Process
	js      jetstream.JetStream
	// pubs connect to one server each, so that the load goes on through
	// another when one is killed or cut off.
	pubs []jetstream.JetStream
	// revision is the last revision published per node and pod; the
	// publisher's goroutine owns it while it runs, the test's otherwise.
	revision map[podKey]int64
	// Readers of the streams, cumulative over the runs.
	intents, results, events *streamReader
	// newPods are the pods first applied during this run's fault (by
	// startPodsDuringFault), and newPodsApplied counts them over the runs;
	// the test's goroutine owns both.
	newPods        []podKey
	newPodsApplied int
}

type podKey struct{ node, uid string }

func nodeName(i int) string { return fmt.Sprintf("n%d", i+1) }

// newRig starts the cluster from deploy/nats/nats-server.conf, three
// `jetlet run` nodes on it with the embedded runtime, and brings up
// podsPerNode pods on each.
func newRig(t *testing.T) *rig {
	r := &rig{t: t, revision: map[podKey]int64{}}
	r.cluster = natscluster.Start(t, natscluster.Config{
		File: filepath.Join("..", "..", "deploy", "nats", "nats-server.conf"),
		Includes: map[string]string{
			// Placeholders for the deployment's secrets: the harness gives the
			// routes on the command line, with this password.
			"routes.conf": fmt.Sprintf("authorization { user: route, password: %q }\n", routePassword),
			"jetlet-auth.conf": fmt.Sprintf("authorization { users: [ {user: %s, password: %q} ] }\n",
				jetletUser, jetletPassword),
		},
		RouteUser: "route", RoutePassword: routePassword,
	})
	r.js = r.connect(r.cluster.URLs())
	for _, s := range r.cluster.Servers {
		r.pubs = append(r.pubs, r.connect(s.URL()))
	}
	for i := range nodes {
		dir := shortDir(t)
		jetlettest.RemovePodsOnCleanup(t, dir)
		r.procs = append(r.procs, jetlettest.Start(t, "run", "--node", nodeName(i), "--data-dir", dir,
			"--http-listen", "127.0.0.1:0", "--nats-url", r.cluster.URLs(),
			"--nats-user", jetletUser, "--nats-password", jetletPassword,
			"--replicas", "3", "--intent-history", "64"))
	}
	for _, p := range r.procs {
		p.WaitReady(2 * time.Minute)
	}
	r.intents = newStreamReader(r.js, schemas.StreamIntents)
	r.results = newStreamReader(r.js, schemas.StreamResults)
	r.events = newStreamReader(r.js, schemas.StreamEvents)
	// Pods up before any fault, so that the runs exercise the intent
	// pipeline rather than pod creation.
	for i := range nodes {
		for u := range podsPerNode {
			r.publish(context.Background(), i, u, "warm-up")
		}
	}
	r.waitConverged(3 * time.Minute)
	return r
}

func (r *rig) connect(urls string) jetstream.JetStream {
	r.t.Helper()
	nc, err := nats.Connect(urls, nats.UserInfo(jetletUser, jetletPassword),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.RetryOnFailedConnect(true))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		r.t.Fatal(err)
	}
	return js
}

// shortDir is a temporary directory with a path short enough for the
// embedded runtime's unix socket.
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "jchaos")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func podUID(node, u int) string { return fmt.Sprintf("%s-pod-%02d", nodeName(node), u) }

// publish stores the next revision of pod u of node i, retrying through
// each server in turn until JetStream acknowledges it; the message id makes
// a retry of a stored intent a duplicate JetStream drops.
func (r *rig) publish(ctx context.Context, node, u int, msgIDPrefix string) bool {
	key := podKey{nodeName(node), podUID(node, u)}
	r.revision[key]++
	return r.publishRevision(ctx, node, key, r.revision[key], msgIDPrefix)
}

// publishRevision stores revision rev of the pod key on node i, as publish.
func (r *rig) publishRevision(ctx context.Context, node int, key podKey, rev int64, msgIDPrefix string) bool {
	msg := nats.NewMsg(fmt.Sprintf("jetlet.intent.%s.%s", key.node, key.uid))
	msg.Data = []byte(podJSON(key.uid, rev))
	msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s.%s.%s.%d", msgIDPrefix, key.node, key.uid, rev))
	for try := 0; ctx.Err() == nil; try++ {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := r.pubs[(node+try)%len(r.pubs)].PublishMsg(attempt, msg)
		cancel()
		if err == nil {
			return true
		}
	}
	return false
}

// podJSON is an apply intent whose spec is the same at every revision: after
// the first, a sync finds the pod converged and only the revision changes.
func podJSON(uid string, rev int64) string {
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":%d,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"},
	    "spec":{"restartPolicy":"Always","terminationGracePeriodSeconds":2,
	      "containers":[{"name":"app","image":"busybox:1.36","command":["/bin/sh","-c","exec sleep 86400"]}]}}}`,
		rev, uid, uid)
}

// waitConverged waits until every pod's status holds its last revision and
// is Running.
func (r *rig) waitConverged(timeout time.Duration) {
	r.t.Helper()
	var kv jetstream.KeyValue
	pending := func() []string {
		if kv == nil {
			// Looked up in the poll: just after a fault the cluster may
			// not answer the first API call within its timeout.
			var err error
			if kv, err = r.js.KeyValue(r.t.Context(), schemas.BucketStatus); err != nil {
				return []string{fmt.Sprintf("bucket %s: %v", schemas.BucketStatus, err)}
			}
		}
		var out []string
		for key, rev := range r.revision {
			e, err := kv.Get(r.t.Context(), key.node+"."+key.uid)
			if err != nil {
				out = append(out, fmt.Sprintf("%s/%s: %v", key.node, key.uid, err))
				continue
			}
			var st schemas.PodStatus
			if err := json.Unmarshal(e.Value(), &st); err != nil {
				r.t.Fatal(err)
			}
			if st.Revision != rev || st.Phase != schemas.PhaseRunning {
				out = append(out, fmt.Sprintf("%s/%s: revision %d %s, want %d Running", key.node, key.uid, st.Revision, st.Phase, rev))
			}
		}
		return out
	}
	var last []string
	poll.Until(r.t, timeout, func() string { return fmt.Sprintf("every pod converged; %d not: %.5v", len(last), last) }, func() bool {
		last = pending()
		return len(last) == 0
	})
}

// stored is a message of a stream with what the tests read from it.
type stored struct {
	seq     uint64
	subject string
	time    time.Time
	data    []byte
}

// streamReader reads a stream in order through an ordered consumer; each
// read adds what is new.
type streamReader struct {
	js     jetstream.JetStream
	stream string
	mu     sync.Mutex // guards oc and msgs
	oc     jetstream.Consumer
	msgs   []stored
}

func newStreamReader(js jetstream.JetStream, stream string) *streamReader {
	return &streamReader{js: js, stream: stream}
}

// read returns every message now in the stream. It fails the test if the
// stream cannot be read for a minute (a server lost a moment ago can make a
// read fail).
func (s *streamReader) read(t testing.TB) []stored {
	t.Helper()
	var msgs []stored
	var err error
	poll.Until(t, time.Minute, func() string { return fmt.Sprintf("a read of %s; last error: %v", s.stream, err) }, func() bool {
		msgs, err = s.tryRead(t.Context())
		return err == nil
	})
	return msgs
}

func (s *streamReader) tryRead(ctx context.Context) ([]stored, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oc == nil {
		st, err := s.js.Stream(ctx, s.stream)
		if err != nil {
			return nil, err
		}
		if s.oc, err = st.OrderedConsumer(context.Background(), jetstream.OrderedConsumerConfig{}); err != nil {
			return nil, err
		}
	}
	for {
		batch, err := s.oc.FetchNoWait(1000)
		if err != nil {
			return nil, err
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			s.msgs = append(s.msgs, stored{seq: meta.Sequence.Stream, subject: m.Subject(), time: meta.Timestamp, data: m.Data()})
		}
		if err := batch.Error(); err != nil {
			return nil, err
		}
		if got == 0 {
			return s.msgs, nil
		}
	}
}

// lastSeq is the stream's last sequence.
func (r *rig) lastSeq(stream string) uint64 {
	r.t.Helper()
	st, err := r.js.Stream(r.t.Context(), stream)
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := st.Info(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	return info.State.LastSeq
}
