package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/syncbuf"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
)

// cliResult is what one in-process run of the jetlet command line printed.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs the client commands in-process, as main does, with the
// given standard input and captured output.
func runCLI(ctx context.Context, stdin string, args ...string) cliResult {
	var stdout, stderr bytes.Buffer
	code := runCLIWith(ctx, strings.NewReader(stdin), &stdout, &stderr, args...)
	return cliResult{stdout.String(), stderr.String(), code}
}

// runCLIWith runs the command line with the given streams and returns its
// exit code.
func runCLIWith(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, args ...string) int {
	root := cli.NewRoot(Commands()...)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return cli.Execute(ctx, root, args, stderr)
}

// startJetletRun runs `jetlet run` (embedded NATS, embedded runtime) as
// the README does: in a directory of its own, the default data dir under
// it, whose seed authenticates the commands the test runs from there. The
// pods named are deleted before the process is killed: no container is
// left running.
func startJetletRun(t testing.TB, pods ...string) (*jetlettest.Process, *cluster) {
	t.Helper()
	jetlettest.Binary(t)                 // built from inside the module, before leaving it
	dir, err := os.MkdirTemp("", "jrun") // short: the runtime's socket lives under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// After the process is gone: whatever the deletes below left.
	jetlettest.RemovePodsOnCleanup(t, filepath.Join(dir, "jetlet-data"))
	t.Chdir(dir)
	p := jetlettest.Start(t, "run", "--node", "n1", "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	p.WaitReady(60 * time.Second)
	c := &cluster{t: t, url: p.NATSURL()}
	t.Cleanup(func() {
		for _, name := range pods {
			c.run("delete", "default/"+name, "--wait", "--grace", "0", "--ignore-not-found")
		}
	})
	return p, c
}

// following is a command that runs until interrupted (a follow, a watch),
// run in the background.
type following struct {
	stdout, stderr syncbuf.Buffer
	cancel         context.CancelFunc
	done           chan int
}

// follow starts a command that runs until interrupted.
func (c *cluster) follow(args ...string) *following {
	ctx, cancel := context.WithCancel(c.t.Context())
	f := &following{cancel: cancel, done: make(chan int, 1)}
	go func() {
		f.done <- runCLIWith(ctx, strings.NewReader(""), &f.stdout, &f.stderr, append(args, "--nats-url", c.url)...)
	}()
	return f
}

// stop interrupts the command, as SIGINT does, and checks that it exits 0
// at once.
func (f *following) stop(t *testing.T) {
	t.Helper()
	f.cancel()
	select {
	case code := <-f.done:
		if code != 0 {
			t.Errorf("exit %d after interrupt, want 0; stderr %s", code, f.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command did not stop when interrupted")
	}
}

// cluster is an embedded nats-server with jetlet's streams and buckets, as
// `jetlet run` provisions them.
type cluster struct {
	t   testing.TB
	url string
	js  jetstream.JetStream
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	srv := natstest.RunServer(t)
	_, js := natstest.Connect(t, srv)
	cfg := natsjs.StreamsConfig{Storage: jetstream.MemoryStorage}
	cfg.SetDefaults()
	if err := natsjs.Provision(t.Context(), js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, url: srv.ClientURL(), js: js}
}

// run runs a client command against the cluster.
func (c *cluster) run(args ...string) cliResult {
	return c.runIn("", args...)
}

func (c *cluster) runIn(stdin string, args ...string) cliResult {
	c.t.Helper()
	// Not t.Context(): cleanups run commands too, after it is cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res := runCLI(ctx, stdin, append(args, "--nats-url", c.url)...)
	c.t.Logf("jetlet %s\n--- exit %d; stdout:\n%s--- stderr:\n%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	return res
}

// heartbeat stores node's record in jetlet_nodes, as a live jetlet does.
func (c *cluster) heartbeat(node string) {
	c.t.Helper()
	kv, err := c.js.KeyValue(c.t.Context(), schemas.BucketNodes)
	if err != nil {
		c.t.Fatal(err)
	}
	rec := schemas.NodeRecord{
		APIVersion: schemas.APIVersion, Kind: schemas.KindNode, Node: node,
		JetletVersion: "test", RuntimeName: "fake", RuntimeVersion: "0.1", RuntimeAPIVersion: "v1",
		Pods:      schemas.PodCounts{Total: 0, ByPhase: map[schemas.PodPhase]int{}},
		StartedAt: time.Now().Add(-time.Hour).UTC(), HeartbeatAt: time.Now().UTC(),
	}
	data, _ := json.Marshal(rec)
	if _, err := kv.Put(c.t.Context(), node, data); err != nil {
		c.t.Fatal(err)
	}
}

// putStatus stores a pod's status in jetlet_status.
func (c *cluster) putStatus(st schemas.PodStatus) {
	c.t.Helper()
	kv, err := c.js.KeyValue(c.t.Context(), schemas.BucketStatus)
	if err != nil {
		c.t.Fatal(err)
	}
	data, _ := json.Marshal(st)
	if _, err := kv.Put(c.t.Context(), schemas.StatusKey(st.Node, st.UID), data); err != nil {
		c.t.Fatal(err)
	}
}

// storedIntent is an intent as JETLET_INTENTS holds it.
type storedIntent struct {
	subject string
	msgID   string
	seq     uint64
	body    map[string]any
}

// intents returns every intent stored, in order.
func (c *cluster) intents() []storedIntent {
	c.t.Helper()
	s, err := c.js.Stream(c.t.Context(), schemas.StreamIntents)
	if err != nil {
		c.t.Fatal(err)
	}
	var out []storedIntent
	for seq := uint64(1); seq <= s.CachedInfo().State.LastSeq; seq++ {
		m, err := s.GetMsg(c.t.Context(), seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			c.t.Fatal(err)
		}
		var body map[string]any
		_ = json.Unmarshal(m.Data, &body)
		out = append(out, storedIntent{m.Subject, m.Header.Get(jetstream.MsgIDHeader), m.Sequence, body})
	}
	return out
}

// podMeta reads pod.metadata.<field> of a stored intent body.
func (s storedIntent) podMeta(field string) string {
	pod, _ := s.body["pod"].(map[string]any)
	md, _ := pod["metadata"].(map[string]any)
	v, _ := md[field].(string)
	return v
}

func wantContains(t testing.TB, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}

func wantCode(t testing.TB, res cliResult, code int) {
	t.Helper()
	if res.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", res.code, code, res.stdout, res.stderr)
	}
}
