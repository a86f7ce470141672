package shim

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// attachBacklog is how many pieces of output an attached client may fall
// behind before it is detached: a slow client never holds up the container's
// output, which its log gets first.
const attachBacklog = 256

// chunk is a piece of a container's output.
type chunk struct {
	stderr bool
	data   []byte
}

// attachment is one attached client's output files, written by a goroutine of
// its own from its queue.
type attachment struct {
	stdout, stderr *os.File      // nil when not asked for; owned by write
	queue          chan chunk    // closed by the fanout that detaches it
	done           chan struct{} // closed when the queue is drained and the files closed
}

func newAttachment(stdout, stderr *os.File) *attachment {
	a := &attachment{stdout: stdout, stderr: stderr, queue: make(chan chunk, attachBacklog), done: make(chan struct{})}
	go a.write()
	return a
}

func (a *attachment) write() {
	defer close(a.done)
	for c := range a.queue {
		f := &a.stdout
		if c.stderr {
			f = &a.stderr
		}
		if *f == nil {
			continue
		}
		if _, err := (*f).Write(c.data); err != nil {
			// The client is gone: drop what is left for it.
			(*f).Close()
			*f = nil
		}
	}
	for _, f := range []*os.File{a.stdout, a.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

// fanout copies a container's output, as it is read for the log, to the
// clients attached to it.
type fanout struct {
	mu    sync.Mutex
	subs  map[*attachment]struct{} // guarded by mu
	ended bool                     // guarded by mu: the output ended, nothing attaches any more
}

// attach adds a, unless the output has ended.
func (f *fanout) attach(a *attachment) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return false
	}
	if f.subs == nil {
		f.subs = map[*attachment]struct{}{}
	}
	f.subs[a] = struct{}{}
	return true
}

// detach removes a, if still attached, and lets its writer finish.
func (f *fanout) detach(a *attachment) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.detachLocked(a)
}

func (f *fanout) detachLocked(a *attachment) {
	if _, ok := f.subs[a]; ok {
		delete(f.subs, a)
		close(a.queue)
	}
}

// end detaches every client: the container's output has ended.
func (f *fanout) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = true
	for a := range f.subs {
		f.detachLocked(a)
	}
}

func (f *fanout) send(stderr bool, p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) == 0 {
		return
	}
	c := chunk{stderr: stderr, data: append([]byte(nil), p...)}
	for a := range f.subs {
		select {
		case a.queue <- c:
		default:
			f.detachLocked(a)
		}
	}
}

// attach connects files, named by req.Streams, to the running container of
// req.Dir: stdin is copied to the command's stdin (dropped when it has none),
// and the command's output from now on to stdout and stderr; the window sizes
// the caller sends resize its terminal. It returns when the output ends (the
// command exited), when stdin ends (with StdinOnce and no terminal that
// closes the command's stdin instead, as containerd does), or when the caller
// hangs up.
func (p *podShim) attach(conn *os.File, req Request, files []*os.File) error {
	if len(files) != len(req.Streams) {
		return fmt.Errorf("attach names %d streams and sends %d files", len(req.Streams), len(files))
	}
	var in, out, errOut *os.File
	for i, name := range req.Streams {
		switch name {
		case StreamStdin:
			in = files[i]
		case StreamStdout:
			out = files[i]
		case StreamStderr:
			errOut = files[i]
		default:
			return fmt.Errorf("attach: unknown stream %q", name)
		}
	}
	p.mu.Lock()
	r := p.running[req.Dir]
	p.mu.Unlock()
	a := newAttachment(out, errOut)
	if r == nil || !r.output.attach(a) {
		close(a.queue)
		<-a.done
		return fmt.Errorf("container %s is not running", filepath.Base(req.Dir))
	}
	if in != nil {
		go func() {
			r.copyStdin(in)
			if r.spec.StdinOnce && !r.spec.Tty {
				r.closeStdin()
			} else {
				r.output.detach(a)
			}
		}()
	}
	select {
	case <-a.done:
	case <-r.resizeUntilHangUp(conn):
		r.output.detach(a)
		<-a.done
	}
	return nil
}

// resizeUntilHangUp applies the window sizes read from conn to the terminal
// (if any) until the caller hangs up, then closes the channel it returns.
func (r *running) resizeUntilHangUp(conn *os.File) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		dec := json.NewDecoder(conn)
		for {
			var size WindowSize
			if dec.Decode(&size) != nil {
				return
			}
			if r.terminal != nil {
				_ = SetWindowSize(r.terminal, size.Width, size.Height)
			}
		}
	}()
	return ch
}

// copyStdin copies in to the command's stdin until in ends or the command's
// stdin is closed; without a stdin, in is read and dropped.
func (r *running) copyStdin(in *os.File) {
	r.stdinMu.Lock()
	w := r.stdin
	r.stdinMu.Unlock()
	if w == nil {
		_, _ = io.Copy(io.Discard, in)
		return
	}
	_, _ = io.Copy(w, in)
}

// closeStdin closes the command's stdin, once.
func (r *running) closeStdin() {
	r.stdinMu.Lock()
	defer r.stdinMu.Unlock()
	if r.stdin != nil {
		r.stdin.Close()
		r.stdin = nil
	}
}

// hungUp is closed when the caller on conn hangs up (it sends nothing after
// its request, so a read returns only then).
func hungUp(conn *os.File) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		_, _ = conn.Read(make([]byte, 1))
		close(ch)
	}()
	return ch
}
