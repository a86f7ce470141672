package nodeclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetlet/jetlet/runtime/nodeservice/busstream"
	"github.com/jetlet/jetlet/schemas"
)

// Stream is a client's open stream of a node (docs/wire-protocol.md
// section 12, Streams).
type Stream struct {
	conn *busstream.Conn
	node string
}

// errClientClosed is the client's abort when it stops a stream before
// its end.
var errClientClosed = errors.New("the client closed the stream")

// OpenStream asks node to open req's stream and waits for its opening: a
// service error (no such pod, the container not running, not allowed)
// comes back here. The stream ends with ctx.
func OpenStream(ctx context.Context, nc *nats.Conn, subj schemas.Subjects, node string, req schemas.StreamRequest) (*Stream, error) {
	if req.Window == 0 {
		req.Window = schemas.DefaultStreamWindow
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	inbox := nc.NewInbox()
	conn, err := busstream.Listen(ctx, nc, inbox, busstream.Config{Window: req.Window})
	if err != nil {
		return nil, err
	}
	if err := nc.PublishMsg(&nats.Msg{Subject: subj.NodeService(node, schemas.EndpointStream), Reply: inbox, Data: body}); err != nil {
		conn.Close()
		return nil, err
	}
	late := time.AfterFunc(FirstReplyTimeout, func() {
		conn.Abort(fmt.Errorf("node %s did not answer within %s", node, FirstReplyTimeout))
	})
	f, err := conn.Recv()
	late.Stop()
	if err == nil {
		if err = replyErr(&nats.Msg{Header: f.Header}); err == nil && f.Kind != schemas.FrameOpen {
			err = fmt.Errorf("node %s: a stream's first frame is %q, not its opening", node, f.Kind)
		}
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetPeer(f.Header.Get(schemas.HeaderStreamSubject))
	return &Stream{conn: conn, node: node}, nil
}

// Stdin is the stream's standard input (a port-forward's bytes to the
// port); Close sends its end.
func (s *Stream) Stdin() io.WriteCloser { return s.conn.Writer(schemas.ChannelStdin) }

// Resize sends the terminal's size.
func (s *Stream) Resize(sz schemas.TerminalSize) error {
	b, err := json.Marshal(sz)
	if err != nil {
		return err
	}
	return s.conn.Send(schemas.FrameResize, 0, b)
}

// Close stops the stream: the node is told and ends it at once.
func (s *Stream) Close() { s.conn.Abort(errClientClosed) }

// closeWriter is a writer with a half-close: a TCP connection.
type closeWriter interface{ CloseWrite() error }

// Output writes what the node sends to stdout and stderr (nil: stderr
// is dropped) until the exit frame, and returns it. A stdout that can
// half-close (a TCP connection) is half-closed at the end of its channel.
func (s *Stream) Output(stdout, stderr io.Writer) (schemas.StreamExit, error) {
	for {
		f, err := s.conn.Recv()
		if err != nil {
			return schemas.StreamExit{}, s.streamErr(err)
		}
		switch f.Kind {
		case schemas.FrameData:
			w := stdout
			if f.Channel == schemas.ChannelStderr {
				w = stderr
			}
			if w == nil {
				continue
			}
			if _, err := w.Write(f.Data); err != nil {
				s.Close()
				return schemas.StreamExit{}, err
			}
		case schemas.FrameClose:
			if cw, ok := stdout.(closeWriter); ok && f.Channel == schemas.ChannelStdout {
				_ = cw.CloseWrite()
			}
		case schemas.FrameExit:
			var exit schemas.StreamExit
			if err := json.Unmarshal(f.Data, &exit); err != nil {
				return exit, fmt.Errorf("node %s: the stream's exit: %w", s.node, err)
			}
			s.conn.Close()
			if exit.Error != "" {
				return exit, fmt.Errorf("node %s: %s", s.node, exit.Error)
			}
			return exit, nil
		}
	}
}

// streamErr says what ended a stream before its exit.
func (s *Stream) streamErr(err error) error {
	switch {
	case errors.Is(err, busstream.ErrBusLost):
		return fmt.Errorf("stream to node %s ended: %w (what was in flight is lost)", s.node, err)
	case errors.Is(err, busstream.ErrPeerGone):
		return fmt.Errorf("stream to node %s ended: node %s went silent for %s", s.node, s.node, schemas.StreamPeerTimeout)
	}
	return fmt.Errorf("stream to node %s ended: %w", s.node, err)
}

// StreamIO is what Run joins a stream to.
type StreamIO struct {
	// Stdin, when not nil, is copied to the stream and its end closes the
	// stream's stdin (Ctrl-D without a terminal).
	Stdin io.Reader
	// Stdout and Stderr take the output (with a terminal, both in
	// Stdout).
	Stdout, Stderr io.Writer
	// Resize, when not nil, gives the terminal's sizes.
	Resize <-chan schemas.TerminalSize
}

// Run joins s to sio until the node sends its exit, which it returns,
// or ctx ends (the stream is then stopped).
func (s *Stream) Run(ctx context.Context, sio StreamIO) (schemas.StreamExit, error) {
	defer context.AfterFunc(ctx, s.Close)()
	if sio.Stdin != nil {
		go func() {
			in := s.Stdin()
			if _, err := io.CopyBuffer(in, sio.Stdin, make([]byte, schemas.StreamFrameSize)); err == nil {
				_ = in.Close()
			}
		}()
	}
	if sio.Resize != nil {
		go func() {
			for {
				select {
				case <-s.conn.Context().Done():
					return
				case sz := <-sio.Resize:
					if s.Resize(sz) != nil {
						return
					}
				}
			}
		}()
	}
	exit, err := s.Output(sio.Stdout, sio.Stderr)
	if err != nil && ctx.Err() != nil {
		return exit, context.Cause(ctx)
	}
	return exit, err
}
