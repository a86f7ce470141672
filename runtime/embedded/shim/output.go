package shim

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// outputCopier copies a container's output (its stdout and stderr pipes, or
// its terminal) to its log and to the clients attached to it.
//
// Two pipes keep no order between them: the order the container wrote to
// them is known only from the order they became readable, which an epoll
// instance's ready list keeps (edge-triggered: a write to a stream already
// reported queues it anew behind the others; level-triggered would keep it
// at its old place). So one goroutine reads the streams in that order and
// stamps each read as it returns: a line to stdout and one to stderr
// written back to back are logged in the order written (a goroutine per
// pipe logged them in the order the scheduler happened to run the two). The
// streams are registered before the command starts, so that its first
// writes are ordered too. Lines written faster than the copier reads them
// come in one read per stream, which no reader of two pipes can interleave.
type outputCopier struct {
	epfd    int
	streams map[int32]*outputStream // by fd; owned by copy once it runs
	// Closing stopW ends copy (the drain timeout): its read end, in the
	// epoll set, hangs up.
	stopR, stopW *os.File
}

type outputStream struct {
	stderr bool
	lines  streamLines
}

// newOutputCopier registers the shim's ends of the container's output. The
// files stay blocking: a read comes only when FIONREAD (TIOCINQ) counts
// bytes to read, or once the writers are gone (it then returns at once), and
// nothing else reads these files.
func newOutputCopier(own containerIO) (*outputCopier, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("epoll: %w", err)
	}
	c := &outputCopier{epfd: epfd, streams: map[int32]*outputStream{}}
	if c.stopR, c.stopW, err = os.Pipe(); err != nil {
		c.close()
		return nil, err
	}
	add := func(f *os.File) (int32, error) {
		fd := int32(f.Fd())
		return fd, unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, int(fd), &unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: fd})
	}
	for _, s := range []struct {
		f      *os.File
		stream string
	}{{own.out, "stdout"}, {own.errOut, "stderr"}} {
		if s.f == nil {
			continue
		}
		fd, err := add(s.f)
		if err != nil {
			c.close()
			return nil, fmt.Errorf("epoll %s: %w", s.stream, err)
		}
		c.streams[fd] = &outputStream{stderr: s.stream == "stderr", lines: streamLines{stream: s.stream}}
	}
	if _, err := add(c.stopR); err != nil {
		c.close()
		return nil, fmt.Errorf("epoll: %w", err)
	}
	return c, nil
}

// copy copies the output to log and out until every stream has ended or
// stop was called.
func (c *outputCopier) copy(log *criLog, out *fanout) {
	buf := make([]byte, 64<<10)
	events := make([]unix.EpollEvent, len(c.streams)+1)
	defer func() {
		for _, s := range c.streams {
			s.lines.end(log, time.Now()) // stopped: what is left of a line
		}
	}()
	for len(c.streams) > 0 {
		n, err := unix.EpollWait(c.epfd, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		for _, ev := range events[:n] {
			s := c.streams[ev.Fd]
			if s == nil {
				return // stopped
			}
			if !c.drain(ev.Fd, s, ev.Events&(unix.EPOLLHUP|unix.EPOLLERR) != 0, buf, log, out) {
				_ = unix.EpollCtl(c.epfd, unix.EPOLL_CTL_DEL, int(ev.Fd), nil)
				delete(c.streams, ev.Fd)
			}
		}
	}
}

// drain reads what stream s holds now, to its end once its writers are gone
// (hup), and reports whether it goes on.
func (c *outputCopier) drain(fd int32, s *outputStream, hup bool, buf []byte, log *criLog, out *fanout) bool {
	for {
		if unread, err := unix.IoctlGetInt(int(fd), unix.TIOCINQ); !hup && err == nil && unread == 0 {
			return true // read already, with an earlier event's bytes
		}
		k, err := unix.Read(int(fd), buf)
		at := time.Now()
		switch {
		case k > 0:
			out.send(s.stderr, buf[:k])
			s.lines.add(log, buf[:k], at)
		case errors.Is(err, unix.EINTR):
		default: // the end (EOF; EIO from a terminal whose command is gone)
			s.lines.end(log, at)
			return false
		}
	}
}

// stop ends a copy that waits for output still.
func (c *outputCopier) stop() { _ = c.stopW.Close() }

// close releases the epoll instance and the stop pipe, once copy has ended
// (or never ran). The streams' files are their owner's to close.
func (c *outputCopier) close() {
	_ = unix.Close(c.epfd)
	for _, f := range []*os.File{c.stopR, c.stopW} {
		if f != nil {
			_ = f.Close()
		}
	}
}
