package busstream_test

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetlet/jetlet/runtime/nodeservice/busstream"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// pair is the two ends of a stream, each on its own connection, as a
// node and a client are.
func pair(t *testing.T, cfg busstream.Config) (a, b *busstream.Conn, ncA, ncB *nats.Conn) {
	t.Helper()
	s := natstest.RunServer(t)
	ncA, _ = natstest.Connect(t, s)
	ncB, _ = natstest.Connect(t, s)
	var err error
	if a, err = busstream.Listen(t.Context(), ncA, "test.a", cfg); err != nil {
		t.Fatal(err)
	}
	if b, err = busstream.Listen(t.Context(), ncB, "test.b", cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	a.SetPeer("test.b")
	b.SetPeer("test.a")
	for _, nc := range []*nats.Conn{ncA, ncB} {
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, ncA, ncB
}

func TestASlowReaderHoldsTheWriterBack(t *testing.T) {
	const window, frames = 3, 20
	a, b, _, _ := pair(t, busstream.Config{Window: window})
	var sent atomic.Int64
	go func() {
		w := a.Writer(schemas.ChannelStdout)
		for i := range frames {
			if _, err := w.Write([]byte(strconv.Itoa(i))); err != nil {
				return
			}
			sent.Add(1)
		}
	}()
	// The writer fills the window and no more while nothing is read.
	poll.Until(t, 10*time.Second, func() string { return fmt.Sprintf("the window's %d frames sent; %d", window, sent.Load()) }, func() bool {
		return sent.Load() == window
	})
	for consumed := range frames {
		// Taking frame n grants credit for frame n-1 only: the writer is
		// never more than the window beyond what was consumed.
		if s := sent.Load(); s > int64(consumed+window) {
			t.Fatalf("%d frames sent with %d consumed and a window of %d", s, consumed, window)
		}
		f, err := b.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind != schemas.FrameData || f.Channel != schemas.ChannelStdout || string(f.Data) != strconv.Itoa(consumed) {
			t.Fatalf("frame %d: %+v, want data %d on stdout, in order", consumed, f, consumed)
		}
	}
}

func TestALostFrameEndsTheStream(t *testing.T) {
	_, b, ncA, _ := pair(t, busstream.Config{})
	// Frame 2 without frame 1: what a slow consumer's dropped messages look like.
	if err := ncA.PublishMsg(&nats.Msg{Subject: "test.b", Header: nats.Header{
		schemas.HeaderStreamFrame: {schemas.FrameData}, schemas.HeaderStreamSeq: {"2"},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Recv(); err == nil || err.Error() != "stream: frame 2 after 0: frames were lost" {
		t.Fatalf("Recv: %v, want the lost frames", err)
	}
}

func TestAnAbortTellsThePeerWhy(t *testing.T) {
	a, b, _, _ := pair(t, busstream.Config{})
	a.Abort(errors.New("the node is shutting down"))
	_, err := b.Recv()
	if ae, ok := errors.AsType[*busstream.AbortError](err); !ok || ae.Reason != "the node is shutting down" {
		t.Fatalf("Recv after the peer's abort: %v", err)
	}
}

func TestASilentPeerEndsTheStream(t *testing.T) {
	s := natstest.RunServer(t)
	nc, _ := natstest.Connect(t, s)
	c, err := busstream.Listen(t.Context(), nc, "test.alone", busstream.Config{Keepalive: 10 * time.Millisecond, PeerTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Recv(); !errors.Is(err, busstream.ErrPeerGone) {
		t.Fatalf("Recv with nobody there: %v, want ErrPeerGone", err)
	}
}

// TestABusRestartEndsTheStreamAndLeavesNothing: frames in flight while
// the server was away are lost, so both ends stop at once with
// ErrBusLost rather than wait out the peer timeout, and each unsubscribes.
func TestABusRestartEndsTheStreamAndLeavesNothing(t *testing.T) {
	opts := natstest.Options(t.TempDir())
	s := natstest.Start(t, opts)
	opts.Port = s.Addr().(*net.TCPAddr).Port // the restart's, where the clients reconnect
	url := s.ClientURL()
	conns := make([]*nats.Conn, 2)
	for i := range conns {
		nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		conns[i] = nc
	}
	a, err := busstream.Listen(t.Context(), conns[0], "test.a", busstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := busstream.Listen(t.Context(), conns[1], "test.b", busstream.Config{})
	if err != nil {
		t.Fatal(err)
	}
	a.SetPeer("test.b")
	b.SetPeer("test.a")
	for _, nc := range conns {
		if err := nc.Flush(); err != nil { // each subscription is the server's
			t.Fatal(err)
		}
	}
	if err := a.Send(schemas.FrameData, schemas.ChannelStdout, []byte("before")); err != nil {
		t.Fatal(err)
	}
	if f, err := b.Recv(); err != nil || string(f.Data) != "before" {
		t.Fatalf("before the restart: %+v, %v", f, err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	natstest.Start(t, opts)
	for name, c := range map[string]*busstream.Conn{"a": a, "b": b} {
		if _, err := c.Recv(); !errors.Is(err, busstream.ErrBusLost) {
			t.Errorf("%s: Recv across the restart: %v, want ErrBusLost", name, err)
		}
	}
	for i, nc := range conns {
		poll.Until(t, 10*time.Second, func() string { return fmt.Sprintf("connection %d's subscriptions gone; %d", i, nc.NumSubscriptions()) }, func() bool {
			return nc.NumSubscriptions() == 0
		})
	}
	if err := a.Send(schemas.FrameData, 0, []byte("after")); !errors.Is(err, busstream.ErrBusLost) {
		t.Errorf("Send after the restart: %v, want ErrBusLost", err)
	}
}
