package nodeservice

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/jetlet/jetlet/runtime/nodeservice/busstream"
	"github.com/jetlet/jetlet/schemas"
)

// forwards is the node's connections to the runtime's port-forward, one
// per client session and sandbox port, as kubectl keeps one SPDY
// connection per port-forward command: each stream of the session is a
// data and error stream pair on it (docs/wire-protocol.md section 12,
// Streams). One connection is one CRI PortForward call, one header
// compressor each way and one frame queue, whatever the number of streams.
type forwards struct {
	mu sync.Mutex
	m  map[forwardKey]*forwardConn // guarded by mu
}

type forwardKey struct {
	session, sandbox string
	port             int32
}

// forwardConn is one connection to the runtime's port-forward.
type forwardConn struct {
	owner *forwards // and key: set at creation, read-only
	key   forwardKey
	refs  int           // guarded by owner.mu
	ready chan struct{} // closed once dialled: conn and err are set before, read-only after
	conn  httpstream.Connection
	err   error
	ids   atomic.Int64 // the streams' request ids
}

// broken is whether fc was dialled and failed or has since closed; a
// connection still being dialled is not.
func (fc *forwardConn) broken() bool {
	select {
	case <-fc.ready:
	default:
		return false
	}
	if fc.err != nil {
		return true
	}
	select {
	case <-fc.conn.CloseChan():
		return true
	default:
		return false
	}
}

// acquire returns key's connection, dialling it with dial when there is
// none (or it broke); release it when its stream ends.
func (f *forwards) acquire(key forwardKey, dial func() (httpstream.Connection, error)) (*forwardConn, error) {
	f.mu.Lock()
	fc := f.m[key]
	fresh := fc == nil || fc.broken()
	if fresh {
		fc = &forwardConn{owner: f, key: key, ready: make(chan struct{})}
		if f.m == nil {
			f.m = map[forwardKey]*forwardConn{}
		}
		f.m[key] = fc
	}
	fc.refs++
	f.mu.Unlock()
	if fresh {
		fc.conn, fc.err = dial()
		close(fc.ready)
	} else {
		<-fc.ready
	}
	if fc.err != nil {
		fc.release()
		return nil, fc.err
	}
	return fc, nil
}

// release drops a stream's hold on fc; the last one closes it.
func (fc *forwardConn) release() {
	f := fc.owner
	f.mu.Lock()
	fc.refs--
	last := fc.refs == 0
	if last && f.m[fc.key] == fc {
		delete(f.m, fc.key)
	}
	f.mu.Unlock()
	if last && fc.conn != nil {
		fc.conn.Close()
	}
}

// dialPortForward connects to the runtime's port-forward at rawURL (the
// SPDY protocol of kubelet's port-forward, as kubectl speaks it).
func dialPortForward(rawURL string) (httpstream.Connection, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("the runtime's port-forward URL: %w", err)
	}
	tr, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	if err != nil {
		return nil, err
	}
	sc, _, err := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", u).Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, fmt.Errorf("the runtime's port-forward: %w", err)
	}
	return sc, nil
}

// portForwardOver joins conn to one connection to port: an error stream
// and a data stream on fc with a request id of their own. It ends the
// pair, never fc, which the session's other streams share.
func portForwardOver(conn *busstream.Conn, fc *forwardConn, port int32) schemas.StreamExit {
	failed := func(err error) schemas.StreamExit { return schemas.StreamExit{ExitCode: -1, Error: err.Error()} }
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.FormatInt(fc.ids.Add(1), 10))
	errStream, err := fc.conn.CreateStream(h)
	if err != nil {
		return failed(fmt.Errorf("the runtime's port-forward: %w", err))
	}
	defer fc.conn.RemoveStreams(errStream)
	errStream.Close()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := fc.conn.CreateStream(h)
	if err != nil {
		_ = errStream.Reset()
		return failed(fmt.Errorf("the runtime's port-forward: %w", err))
	}
	defer fc.conn.RemoveStreams(data)
	// The runtime writes why the connection to the port failed on the
	// error stream, and closes it at the end.
	remoteErr := make(chan error, 1)
	go func() {
		msg, err := io.ReadAll(errStream)
		if len(msg) > 0 {
			err = errors.New(string(msg))
			_ = data.Reset()
		}
		remoteErr <- err
	}()
	go func() {
		for {
			f, err := conn.Recv()
			if err != nil {
				_ = data.Reset()
				return
			}
			switch f.Kind {
			case schemas.FrameData:
				if _, err := data.Write(f.Data); err != nil {
					_ = data.Reset()
					return
				}
			case schemas.FrameClose:
				data.Close() // half-close: the port reads its end
			}
		}
	}()
	out := conn.Writer(schemas.ChannelStdout)
	_, err = io.CopyBuffer(out, data, make([]byte, schemas.StreamFrameSize))
	if err == nil {
		err = out.Close()
	}
	// Whatever the runtime still sends is dropped: a pair left unread
	// would hold up the connection's other streams.
	_ = data.Reset()
	if rerr := <-remoteErr; rerr != nil {
		return failed(rerr)
	}
	if err != nil && conn.Err() == nil {
		return failed(err)
	}
	return schemas.StreamExit{}
}
