// Package busstream is one end of a stream of the node service over NATS
// (docs/wire-protocol.md section 12, Streams): numbered frames with credit
// in each direction, keepalives both ways, and an end that is clear
// whether a side or the bus goes away. The node and the client each hold
// one Conn; nothing in it knows what the stream carries.
package busstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetlet/jetlet/schemas"
)

// ErrBusLost ends a stream whose NATS connection broke: frames in between
// may be lost, so the stream cannot go on.
var ErrBusLost = errors.New("the NATS connection was lost")

// ErrClosed is what a Conn's calls return once it was closed here.
var ErrClosed = errors.New("stream closed")

// AbortError is the other side's abort: why it stopped.
type AbortError struct{ Reason string }

func (e *AbortError) Error() string { return "the other side stopped the stream: " + e.Reason }

// Frame is a numbered frame received.
type Frame struct {
	Kind    string // schemas.Frame*
	Channel int    // data and close frames'
	Data    []byte
	Header  nats.Header
}

// Config is a Conn's timing; zero fields are the schemas' defaults.
type Config struct {
	Window      int
	Keepalive   time.Duration
	PeerTimeout time.Duration
}

// Conn is one end of a stream. Send and its writers may be called from
// several goroutines; Recv from one.
type Conn struct {
	nc     *nats.Conn
	sub    *nats.Subscription
	status chan nats.Status
	credit *Credit // our sending credit, granted by the peer
	// frames holds the numbered frames received and not yet taken by
	// Recv: at most the window (and the opening), as the peer's credit
	// allows; a peer that sends more is failed.
	frames chan *nats.Msg
	ctx    context.Context
	cancel context.CancelCauseFunc
	cfg    Config

	// sendMu orders numbered frames: it guards sendSeq and peer.
	sendMu  sync.Mutex
	sendSeq int64
	peer    string

	// Recv's own: the last frame taken and the last one granted.
	recvSeq, granted int64
}

// Listen subscribes subject in for a stream's frames; send to the peer
// once SetPeer named its subject. The stream ends with ctx.
func Listen(ctx context.Context, nc *nats.Conn, in string, cfg Config) (*Conn, error) {
	if cfg.Window == 0 {
		cfg.Window = schemas.DefaultStreamWindow
	}
	if cfg.Keepalive == 0 {
		cfg.Keepalive = schemas.StreamKeepalive
	}
	if cfg.PeerTimeout == 0 {
		cfg.PeerTimeout = schemas.StreamPeerTimeout
	}
	c := &Conn{nc: nc, credit: NewCredit(cfg.Window), frames: make(chan *nats.Msg, cfg.Window+1), cfg: cfg}
	c.ctx, c.cancel = context.WithCancelCause(ctx)
	var err error
	if c.sub, err = nc.Subscribe(in, c.receive); err != nil {
		c.cancel(err)
		return nil, err
	}
	c.status = nc.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED, nats.CLOSED)
	go c.watch()
	return c, nil
}

// SetPeer names the subject frames are sent to.
func (c *Conn) SetPeer(subject string) {
	c.sendMu.Lock()
	c.peer = subject
	c.sendMu.Unlock()
}

// receive is the subscription's handler: credit and keepalives are taken
// at once, numbered frames queued for Recv.
func (c *Conn) receive(m *nats.Msg) {
	c.credit.Heard()
	switch m.Header.Get(schemas.HeaderStreamFrame) {
	case schemas.FrameCredit:
		if ack, err := strconv.ParseInt(m.Header.Get(schemas.HeaderStreamAck), 10, 64); err == nil {
			c.credit.Grant(ack)
		}
	case schemas.FramePing:
	case schemas.FrameAbort:
		c.cancel(&AbortError{Reason: m.Header.Get(schemas.HeaderStreamError)})
	case "":
		// A service error in place of the opening (the client's side).
		c.frames <- m
	default:
		select {
		case c.frames <- m:
		default:
			c.cancel(fmt.Errorf("stream: the other side sent beyond its credit of %d frames", c.cfg.Window))
		}
	}
}

// watch pings the peer, ends the stream when nothing is heard from it for
// the peer timeout or when the NATS connection breaks, and unsubscribes
// at the end.
func (c *Conn) watch() {
	defer func() {
		_ = c.sub.Unsubscribe()
		c.nc.RemoveStatusListener(c.status)
	}()
	go c.credit.Watch(c.ctx, c.cancel, c.cfg.PeerTimeout)
	t := time.NewTicker(c.cfg.Keepalive)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.status:
			c.cancel(ErrBusLost)
			return
		case <-t.C:
			c.control(schemas.FramePing, nil)
		}
	}
}

// Context ends with the stream; its cause says why.
func (c *Conn) Context() context.Context { return c.ctx }

// Err is why the stream ended, nil while it runs.
func (c *Conn) Err() error { return context.Cause(c.ctx) }

// control sends an unnumbered frame; a failure shows in the next Send.
func (c *Conn) control(kind string, h nats.Header) {
	c.sendMu.Lock()
	peer := c.peer
	c.sendMu.Unlock()
	if peer == "" {
		return
	}
	if h == nil {
		h = nats.Header{}
	}
	h.Set(schemas.HeaderStreamFrame, kind)
	_ = c.nc.PublishMsg(&nats.Msg{Subject: peer, Header: h})
}

// Send sends a numbered frame once the peer's credit allows it.
func (c *Conn) Send(kind string, channel int, data []byte) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if c.ctx.Err() != nil {
		return context.Cause(c.ctx)
	}
	if err := c.credit.Wait(c.ctx, c.sendSeq+1); err != nil {
		return err
	}
	c.sendSeq++
	h := nats.Header{
		schemas.HeaderStreamFrame: {kind},
		schemas.HeaderStreamSeq:   {strconv.FormatInt(c.sendSeq, 10)},
	}
	if kind == schemas.FrameData || kind == schemas.FrameClose {
		h.Set(schemas.HeaderStreamChannel, strconv.Itoa(channel))
	}
	return c.nc.PublishMsg(&nats.Msg{Subject: c.peer, Header: h, Data: data})
}

// Open sends the node's opening, frame 0, naming the subject the client
// sends to; it takes no credit.
func (c *Conn) Open(in string) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.nc.PublishMsg(&nats.Msg{Subject: c.peer, Header: nats.Header{
		schemas.HeaderStreamFrame:   {schemas.FrameOpen},
		schemas.HeaderStreamSeq:     {"0"},
		schemas.HeaderStreamSubject: {in},
	}})
}

// Recv returns the next numbered frame. Taking it grants credit for the
// ones before: a reader that has not finished with a frame holds the
// sender back. The credit goes at once when no frame waits (the sender
// may be waiting for it), else once a quarter of the window is owed: one
// credit message for several frames while they stream.
func (c *Conn) Recv() (Frame, error) {
	if owed := c.recvSeq - c.granted; owed > 0 && (len(c.frames) == 0 || owed >= max(1, int64(c.cfg.Window/4))) {
		c.granted = c.recvSeq
		c.control(schemas.FrameCredit, nats.Header{schemas.HeaderStreamAck: {strconv.FormatInt(c.recvSeq, 10)}})
	}
	var m *nats.Msg
	select {
	case <-c.ctx.Done():
		return Frame{}, context.Cause(c.ctx)
	case m = <-c.frames:
	}
	kind := m.Header.Get(schemas.HeaderStreamFrame)
	if kind == "" { // an error reply in place of the opening
		return Frame{Header: m.Header}, nil
	}
	seq, err := strconv.ParseInt(m.Header.Get(schemas.HeaderStreamSeq), 10, 64)
	opening := kind == schemas.FrameOpen && seq == 0 && c.recvSeq == 0
	if err != nil || (seq != c.recvSeq+1 && !opening) {
		err = fmt.Errorf("stream: frame %s after %d: frames were lost", m.Header.Get(schemas.HeaderStreamSeq), c.recvSeq)
		c.cancel(err)
		return Frame{}, err
	}
	c.recvSeq = seq
	ch, _ := strconv.Atoi(m.Header.Get(schemas.HeaderStreamChannel))
	return Frame{Kind: kind, Channel: ch, Data: m.Data, Header: m.Header}, nil
}

// Abort tells the peer why this side stops and ends the stream.
func (c *Conn) Abort(reason error) {
	c.control(schemas.FrameAbort, nats.Header{schemas.HeaderStreamError: {reason.Error()}})
	c.cancel(reason)
}

// Close ends the stream here, sending nothing more.
func (c *Conn) Close() { c.cancel(ErrClosed) }

// Writer is channel's data as an io.WriteCloser: writes are cut into
// frames of schemas.StreamFrameSize, each sent once credit allows; Close
// sends the channel's close frame.
func (c *Conn) Writer(channel int) io.WriteCloser { return chanWriter{c, channel} }

type chanWriter struct {
	c       *Conn
	channel int
}

func (w chanWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		piece := p[:min(len(p), schemas.StreamFrameSize)]
		if err := w.c.Send(schemas.FrameData, w.channel, piece); err != nil {
			return n, err
		}
		n += len(piece)
		p = p[len(piece):]
	}
	return n, nil
}

func (w chanWriter) Close() error { return w.c.Send(schemas.FrameClose, w.channel, nil) }
