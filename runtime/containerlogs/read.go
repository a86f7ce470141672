package containerlogs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// ReadOptions says which part of a container's log Read writes, and how.
type ReadOptions struct {
	// Since drops the lines written before it; zero: none dropped.
	Since time.Time
	// Tail keeps only the last Tail lines of what the files hold when the
	// read starts; negative: all of them.
	Tail int64
	// Timestamps prefixes each line with its time as the log has it
	// (RFC 3339 nano) and a space.
	Timestamps bool
	// Follow waits at the end of the current file for more, across its
	// rotations, until Exited is closed or ctx is done.
	Follow bool
	// Exited is closed once the container has exited: a follow reads the
	// log to its end and returns.
	Exited <-chan struct{}
	// Poll is how often a follow looks for more; 0: DefaultPoll.
	Poll time.Duration
}

// DefaultPoll is how often a follow looks at the log for more.
const DefaultPoll = 100 * time.Millisecond

// MaxLine is the longest line Read joins from partial entries; a longer
// one is written in pieces of MaxLine, each ended with a newline, so a
// container that never writes a newline cannot make a reader hold its
// whole output.
const MaxLine = 1 << 20

// Sink receives the lines Read writes; Flush is called when the reader has
// caught up with the log (and before it returns). *bufio.Writer is one.
type Sink interface {
	io.Writer
	Flush() error
}

// Read writes the CRI log at path (its rotated files first, then the
// current one) to out as lines: the content of each entry, partial (P)
// entries joined with the rest of their line per stream, each stream in file
// order and the two merged by their lines' times (a line's is its first
// entry's), since a runtime may write two lines of its two streams out of
// order (containerd copies each stream in a goroutine of its own). It returns
// nil once everything asked for is written, or ctx's error.
func Read(ctx context.Context, path string, opts ReadOptions, out Sink) error {
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	r := &reader{opts: opts, out: out, pending: map[string]*pendingLine{}, lastTime: map[string]time.Time{}}
	if opts.Tail >= 0 {
		r.tail = newRing(opts.Tail)
	}
	files, err := Files(path)
	if err != nil {
		return err
	}
	var cur *os.File
	for _, f := range files {
		if f == path {
			if cur, err = os.Open(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			break
		}
		if err := r.readRotated(f); err != nil {
			return err
		}
	}
	defer func() {
		if cur != nil {
			cur.Close()
		}
	}()
	var br *bufio.Reader
	if cur != nil {
		br = bufio.NewReaderSize(cur, 64<<10)
		if err := r.readFrom(br); err != nil {
			return err
		}
	}
	if err := r.merged.drain(true, r.emit); err != nil {
		return err
	}
	if r.tail != nil {
		if err := r.tail.writeTo(out); err != nil {
			return err
		}
		r.tail = nil
	}
	if !opts.Follow {
		return out.Flush()
	}
	tick := time.NewTicker(opts.Poll)
	defer tick.Stop()
	for {
		// Read once more after the exit was seen: the last lines.
		exited := isClosed(opts.Exited)
		if cur == nil {
			if cur, err = os.Open(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
			if cur != nil {
				br = bufio.NewReaderSize(cur, 64<<10)
			}
		}
		if cur != nil {
			if err := r.readFrom(br); err != nil {
				return err
			}
			rotated, err := replaced(cur, path)
			if err != nil {
				return err
			}
			if rotated {
				// The runtime reopened the log: the old file is complete.
				if err := r.readFrom(br); err != nil {
					return err
				}
				cur.Close()
				cur, r.rest = nil, nil
				continue
			}
		}
		if err := r.merged.drain(true, r.emit); err != nil {
			return err
		}
		if err := out.Flush(); err != nil {
			return err
		}
		if exited {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		case <-opts.Exited:
		}
	}
}

// replaced reports whether path is no longer the file cur is: the log was
// rotated and the runtime has opened a new one.
func replaced(cur *os.File, path string) (bool, error) {
	now, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // between the rename and the reopen
	}
	if err != nil {
		return false, err
	}
	was, err := cur.Stat()
	if err != nil {
		return false, err
	}
	return !os.SameFile(now, was), nil
}

func isClosed(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// reader turns entries into lines. It belongs to one Read call.
type reader struct {
	opts ReadOptions
	out  Sink
	tail *ring // the last lines, until the files' end is reached; nil: write through
	// pending holds the partial entries of an unfinished line, per stream.
	pending map[string]*pendingLine
	// rest is the start of an entry the writer has not finished writing.
	rest []byte
	// merged holds the whole lines until their turn comes.
	merged merge
	// lastTime is each stream's last line's time, for a line whose own
	// cannot be read.
	lastTime map[string]time.Time
}

type pendingLine struct {
	ts      []byte // the first entry's
	content []byte
}

// readRotated reads one rotated file whole; a file compressed since it was
// listed is read from its .gz, one removed is skipped.
func (r *reader) readRotated(f string) error {
	rc, err := Open(f)
	if errors.Is(err, os.ErrNotExist) && !strings.HasSuffix(f, compressedSuffix) {
		rc, err = Open(f + compressedSuffix)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil // removed as the oldest since it was listed
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := r.readFrom(bufio.NewReaderSize(rc, 64<<10)); err != nil {
		return fmt.Errorf("%s: %w", f, err)
	}
	r.rest = nil // a rotated file ends with whole entries
	return nil
}

// readFrom reads entries until br's end, keeping an unfinished last entry
// in r.rest for the next call.
func (r *reader) readFrom(br *bufio.Reader) error {
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			line := chunk
			if len(r.rest) > 0 {
				line = append(r.rest, chunk...)
				r.rest = r.rest[:0]
			}
			if err := r.entry(line[:len(line)-1]); err != nil {
				return err
			}
		case errors.Is(err, bufio.ErrBufferFull) || errors.Is(err, io.EOF):
			r.rest = append(r.rest, chunk...)
			if errors.Is(err, io.EOF) {
				return nil
			}
		default:
			return err
		}
	}
}

// entry handles one CRI log entry: <time> <stream> <P|F> <content>. A
// malformed entry is skipped.
func (r *reader) entry(line []byte) error {
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return nil
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return nil
	}
	tag, content, ok := bytes.Cut(rest, []byte{' '})
	if !ok { // an empty line has a tag and no space after it in some writers
		tag, content = rest, nil
	}
	if (string(tag) != "P" && string(tag) != "F") || (string(stream) != "stdout" && string(stream) != "stderr") {
		return nil
	}
	p := r.pending[string(stream)]
	if p == nil {
		p = &pendingLine{}
		r.pending[string(stream)] = p
	}
	if p.ts == nil {
		p.ts = append([]byte(nil), ts...)
	}
	p.content = append(p.content, content...)
	for len(p.content) > MaxLine {
		if err := r.line(stream, p.ts, p.content[:MaxLine]); err != nil {
			return err
		}
		p.content = p.content[:copy(p.content, p.content[MaxLine:])]
	}
	if string(tag) == "P" {
		return nil
	}
	err := r.line(stream, p.ts, p.content)
	p.ts, p.content = nil, p.content[:0]
	return err
}

// line hands one whole line of stream to the merge.
func (r *reader) line(stream []byte, ts, content []byte) error {
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		t = r.lastTime[string(stream)] // keeps its place in its stream
	}
	r.lastTime[string(stream)] = t
	if !r.opts.Since.IsZero() && err == nil && t.Before(r.opts.Since) {
		return nil
	}
	n := len(content) + 1
	if r.opts.Timestamps {
		n += len(ts) + 1
	}
	buf := make([]byte, 0, n)
	if r.opts.Timestamps {
		buf = append(append(buf, ts...), ' ')
	}
	buf = append(append(buf, content...), '\n')
	return r.merged.push(string(stream) == "stderr", t, buf, r.emit)
}

// emit writes one line, or keeps it for the tail.
func (r *reader) emit(buf []byte) error {
	if r.tail != nil {
		r.tail.add(buf)
		return nil
	}
	_, err := r.out.Write(buf)
	return err
}

// mergeWindow bounds the bytes of the lines of one stream that wait for a
// line of the other, so that a reader of a log whose other stream is silent
// holds little of it: the writers' disorder spans a few reads at most.
const mergeWindow = 1 << 20

// merge interleaves the lines of the two streams by time. A line is written
// once the other stream has a line too (the earlier goes first, the one
// read first when they tie), when the reader has caught up with the log, or
// when more than mergeWindow bytes wait.
type merge struct {
	queues [2][]timedLine // stdout's, stderr's
	bytes  int
}

type timedLine struct {
	t   time.Time
	buf []byte
}

func (m *merge) push(stderr bool, t time.Time, buf []byte, emit func([]byte) error) error {
	i := 0
	if stderr {
		i = 1
	}
	m.queues[i] = append(m.queues[i], timedLine{t, buf})
	m.bytes += len(buf)
	return m.drain(false, emit)
}

// drain writes the lines whose turn has come; all: every line (caught up).
func (m *merge) drain(all bool, emit func([]byte) error) error {
	for {
		out, errs := m.queues[0], m.queues[1]
		var i int
		switch {
		case len(out) > 0 && len(errs) > 0:
			if errs[0].t.Before(out[0].t) {
				i = 1
			}
		case (all || m.bytes > mergeWindow) && len(out) > 0:
		case (all || m.bytes > mergeWindow) && len(errs) > 0:
			i = 1
		default:
			return nil
		}
		head := m.queues[i][0]
		m.queues[i] = m.queues[i][1:]
		m.bytes -= len(head.buf)
		if err := emit(head.buf); err != nil {
			return err
		}
	}
}

// ring keeps the last n lines.
type ring struct {
	lines [][]byte
	next  int
	n     int64
}

func newRing(n int64) *ring { return &ring{n: n} }

func (r *ring) add(line []byte) {
	switch {
	case r.n == 0:
	case int64(len(r.lines)) < r.n:
		r.lines = append(r.lines, line)
	default:
		r.lines[r.next] = line
		r.next = (r.next + 1) % len(r.lines)
	}
}

func (r *ring) writeTo(w io.Writer) error {
	for i := range r.lines {
		if _, err := w.Write(r.lines[(r.next+i)%len(r.lines)]); err != nil {
			return err
		}
	}
	return nil
}
