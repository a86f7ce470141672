package nodeservice_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/jetlet/jetlet/runtime/nodeservice"
	"github.com/jetlet/jetlet/runtime/nodeservice/nodeclient"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// streamingRuntime adds the CRI's streaming calls to podRuntime, served by
// kubelet's streaming library as the embedded runtime serves them: an
// exec copies its stdin to its stdout until its stream ends.
type streamingRuntime struct {
	*podRuntime
	urls    streaming.Server
	running atomic.Int64 // execs in the runtime now
	// portForwards counts the CRI's PortForward calls; forwarding the
	// connections to a port open now; conns the connections to the
	// streaming server open now.
	portForwards, forwarding, conns atomic.Int64
}

// countingListener counts its connections open in *conns.
type countingListener struct {
	net.Listener
	conns *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.conns.Add(1)
	return &countedConn{Conn: c, conns: l.conns}, nil
}

// countedConn is a connection countingListener counts until it is closed.
type countedConn struct {
	net.Conn
	conns  *atomic.Int64
	closed sync.Once
}

func (c *countedConn) Close() error {
	c.closed.Do(func() { c.conns.Add(-1) })
	return c.Conn.Close()
}

func newStreamingRuntime(t *testing.T) *streamingRuntime {
	r := &streamingRuntime{podRuntime: &podRuntime{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = lis.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: cfg.Addr}
	if r.urls, err = streaming.NewServer(cfg, catStreamer{r}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r.urls, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(countingListener{lis, &r.conns}) }()
	t.Cleanup(func() { srv.Close() })
	return r
}

func (r *streamingRuntime) Exec(_ context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return r.urls.GetExec(req)
}

func (r *streamingRuntime) Attach(_ context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return r.urls.GetAttach(req)
}

func (r *streamingRuntime) PortForward(_ context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	r.portForwards.Add(1)
	return r.urls.GetPortForward(req)
}

type catStreamer struct{ r *streamingRuntime }

func (s catStreamer) Exec(ctx context.Context, _ string, _ []string, in io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
	s.r.running.Add(1)
	defer s.r.running.Add(-1)
	copied := make(chan error, 1)
	go func() { _, err := io.Copy(out, in); copied <- err }()
	select {
	case err := <-copied:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (catStreamer) Attach(context.Context, string, io.Reader, io.WriteCloser, io.WriteCloser, bool, <-chan remotecommand.TerminalSize) error {
	return errors.New("no attach here")
}

// PortForward is a port that echoes what it reads until its end.
func (s catStreamer) PortForward(_ context.Context, _ string, _ int32, stream io.ReadWriteCloser) error {
	s.r.forwarding.Add(1)
	defer s.r.forwarding.Add(-1)
	_, err := io.Copy(stream, stream)
	return err
}

// lineWriter signals each write.
type lineWriter struct{ got chan string }

func (w lineWriter) Write(p []byte) (int, error) { w.got <- string(p); return len(p), nil }

// TestAStreamAcrossANATSRestartEndsClearlyAndLeavesNothing: the server
// goes away under an open stream; the client's ends with the lost
// connection at once, and the node ends its side, the runtime's exec
// with it, and holds nothing.
func TestAStreamAcrossANATSRestartEndsClearlyAndLeavesNothing(t *testing.T) {
	rt := newStreamingRuntime(t)
	rt.add(t, "u1", "app", 1, runtimeapi.ContainerState_CONTAINER_RUNNING)
	opts := natstest.Options(t.TempDir())
	srv := natstest.Start(t, opts)
	opts.Port = srv.Addr().(*net.TCPAddr).Port // the restarted server's
	connect := func() *nats.Conn {
		nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	nodeNC, clientNC := connect(), connect()
	svc, err := nodeservice.New(rt, nodeservice.Config{Node: "n1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx, nodeNC) }()
	t.Cleanup(func() { cancel(); <-done })

	req := schemas.StreamRequest{PodRef: schemas.PodRef{Namespace: "default", Name: "web"}, Kind: schemas.StreamExec, Command: []string{"cat"}, Stdin: true}
	var st *nodeclient.Stream
	poll.Until(t, 10*time.Second, poll.Msg("the stream endpoint"), func() bool {
		st, err = nodeclient.OpenStream(t.Context(), clientNC, subj, "n1", req)
		return !errors.Is(err, nodeclient.ErrNoNode)
	})
	if err != nil {
		t.Fatal(err)
	}
	in, typed := io.Pipe()
	defer typed.Close()
	got := make(chan string, 16)
	ran := make(chan error, 1)
	go func() {
		_, err := st.Run(t.Context(), nodeclient.StreamIO{Stdin: in, Stdout: lineWriter{got}})
		ran <- err
	}()
	if _, err := typed.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "hello\n" {
		t.Fatalf("echoed %q", s)
	}
	if n := svc.InFlight(); n != 1 {
		t.Fatalf("%d streams in flight on the node, want 1", n)
	}

	srv.Shutdown()
	srv.WaitForShutdown()
	natstest.Start(t, opts)
	// The lost connection, not the peer's silence a timeout later.
	if err := <-ran; err == nil || !strings.Contains(err.Error(), "the NATS connection was lost") {
		t.Fatalf("the client's stream ended with %v, want the lost connection", err)
	}
	poll.Until(t, 10*time.Second, func() string {
		return fmt.Sprintf("the node's streams and the runtime's execs to end; %d and %d", svc.InFlight(), rt.running.Load())
	}, func() bool {
		return svc.InFlight() == 0 && rt.running.Load() == 0
	})
}

// TestPortForwardsOfOneSessionShareOneRuntimeConnection: the streams of a
// session are pairs on one connection to the runtime's port-forward (one
// CRI PortForward call), another session's on a connection of its own;
// each carries its own bytes, and the last stream of a session closes its
// connection.
func TestPortForwardsOfOneSessionShareOneRuntimeConnection(t *testing.T) {
	rt := newStreamingRuntime(t)
	rt.add(t, "u1", "app", 1, runtimeapi.ContainerState_CONTAINER_RUNNING)
	_, client := serve(t, rt, nodeservice.Config{})
	type forward struct {
		typed *io.PipeWriter
		got   chan string
		ran   chan error
	}
	open := func(session string) forward {
		t.Helper()
		st, err := nodeclient.OpenStream(t.Context(), client, subj, "n1", schemas.StreamRequest{
			PodRef: schemas.PodRef{Namespace: "default", Name: "web"}, Kind: schemas.StreamPortForward, Port: 80, Session: session})
		if err != nil {
			t.Fatal(err)
		}
		in, typed := io.Pipe()
		f := forward{typed: typed, got: make(chan string, 16), ran: make(chan error, 1)}
		go func() {
			_, err := st.Run(t.Context(), nodeclient.StreamIO{Stdin: in, Stdout: lineWriter{f.got}})
			f.ran <- err
		}()
		return f
	}
	fs := []forward{open("s1"), open("s1"), open("s1"), open("s2")}
	for i, f := range fs {
		msg := fmt.Sprintf("to connection %d\n", i)
		if _, err := f.typed.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if got := <-f.got; got != msg {
			t.Fatalf("connection %d echoed %q, want %q", i, got, msg)
		}
	}
	if n, open := rt.portForwards.Load(), rt.forwarding.Load(); n != 2 || open != 4 {
		t.Fatalf("%d PortForward calls for two sessions (want 2), %d connections to the port (want 4)", n, open)
	}
	for i, f := range fs {
		f.typed.Close() // the port reads its end, echoes it, and ends
		if err := <-f.ran; err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	// Session s1's connection closes with its last stream, once the node
	// has seen that stream end (after its client did): a new stream of s1
	// dials again.
	poll.Until(t, 10*time.Second, func() string {
		return fmt.Sprintf("the sessions' connections closed; %d open", rt.conns.Load())
	}, func() bool { return rt.conns.Load() == 0 })
	f := open("s1")
	if _, err := f.typed.Write([]byte("again\n")); err != nil {
		t.Fatal(err)
	}
	if got := <-f.got; got != "again\n" {
		t.Fatalf("echoed %q", got)
	}
	if n := rt.portForwards.Load(); n != 3 {
		t.Fatalf("%d PortForward calls after s1's connection closed, want 3", n)
	}
	f.typed.Close()
	if err := <-f.ran; err != nil {
		t.Fatal(err)
	}
}
