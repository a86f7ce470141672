package shim

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// CRI log tags and the read buffer that decides when a line is partial.
const (
	logTagFull    = "F"
	logTagPartial = "P"
	// logLineMax is the longest line written as one entry; longer lines are split
	// into partial entries, as containerd does with its 16 KiB buffer.
	logLineMax = 16 << 10
)

// criLog writes container output in the CRI log format:
//
//	<RFC3339Nano timestamp> <stream> <tag> <content>\n
//
// One write per entry, so readers never see half an entry.
type criLog struct {
	mu   sync.Mutex
	path string
	f    *os.File // nil when path is empty: output is discarded
}

func openCRILog(path string) (*criLog, error) {
	l := &criLog{path: path}
	return l, l.open()
}

func (l *criLog) open() error {
	if l.path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	l.f = f
	return nil
}

// reopen closes the log file and opens path again, for log rotation.
func (l *criLog) reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	return l.open()
}

func (l *criLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

func (l *criLog) entry(stream, tag string, content []byte, t time.Time) {
	buf := make([]byte, 0, len(content)+64)
	buf = t.AppendFormat(buf, time.RFC3339Nano)
	buf = append(buf, ' ')
	buf = append(buf, stream...)
	buf = append(buf, ' ')
	buf = append(buf, tag...)
	buf = append(buf, ' ')
	buf = append(buf, content...)
	buf = append(buf, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		_, _ = l.f.Write(buf)
	}
}

// streamLines cuts one stream's output, read in chunks, into log entries. A
// line ending in a newline is written with tag F (the newline, and a \r
// before it, dropped); a line of logLineMax bytes or more is cut into P
// entries; a last line without a newline is written with tag P. Each entry
// has the time of the read that ended it.
type streamLines struct {
	stream  string
	partial []byte // the start of a line not ended yet, shorter than logLineMax
}

// add logs what chunk, read at t, ends.
func (s *streamLines) add(l *criLog, chunk []byte, t time.Time) {
	data := append(s.partial, chunk...)
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		line := data[:i]
		for len(line) >= logLineMax {
			l.entry(s.stream, logTagPartial, line[:logLineMax], t)
			line = line[logLineMax:]
		}
		l.entry(s.stream, logTagFull, bytes.TrimSuffix(line, []byte{'\r'}), t)
		data = data[i+1:]
	}
	for len(data) >= logLineMax {
		l.entry(s.stream, logTagPartial, data[:logLineMax], t)
		data = data[logLineMax:]
	}
	s.partial = append(s.partial[:0], data...)
}

// end logs the last line, unended, when the stream ends at t.
func (s *streamLines) end(l *criLog, t time.Time) {
	if len(s.partial) > 0 {
		l.entry(s.stream, logTagPartial, s.partial, t)
		s.partial = s.partial[:0]
	}
}
