package embedded

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/jetlet/jetlet/runtime/embedded/network"
)

// portForward connects stream to port on the pod's loopback: in the pod's
// network namespace when it has one, else the host's, which the pod
// shares. It returns when the pod's side of the connection ends, or, as
// containerd, at most a second after the client's side ended (half-closing
// the connection to the pod). The library passes no context that ends.
func (r *Runtime) portForward(sandboxID string, port int32, stream io.ReadWriteCloser) error {
	s, err := r.getSandbox(sandboxID)
	if err != nil {
		return err
	}
	r.mu.RLock()
	netns := s.netns
	r.mu.RUnlock()
	var conn net.Conn
	if netns == "" {
		conn, err = net.Dial("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))))
	} else {
		conn, err = network.DialLoopback(netns, int(port))
	}
	if err != nil {
		return fmt.Errorf("port forward to port %d of sandbox %s: %w", port, s.id, err)
	}
	defer conn.Close()
	fromPod := make(chan error, 1)
	go func() {
		// Reads of up to 64 KiB, not the 32 KiB of conn's own WriteTo:
		// each read is a frame on the client's SPDY connection.
		_, err := io.CopyBuffer(stream, struct{ io.Reader }{conn}, make([]byte, 64<<10))
		fromPod <- err
	}()
	toPod := make(chan struct{})
	go func() {
		_, _ = io.Copy(conn, stream)
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		close(toPod)
	}()
	select {
	case err = <-fromPod:
	case <-toPod:
		select {
		case err = <-fromPod:
		case <-time.After(time.Second):
		}
	}
	if err != nil {
		return fmt.Errorf("port forward to port %d of sandbox %s: %w", port, s.id, err)
	}
	return nil
}
