package shim

import (
	"bufio"
	"errors"
	"io"
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

func (l *criLog) entry(stream, tag string, content []byte) {
	buf := make([]byte, 0, len(content)+64)
	buf = time.Now().AppendFormat(buf, time.RFC3339Nano)
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

// copyStream copies r to the log as entries of stream until r ends. A line
// ending in a newline is written with tag F (the newline, and a \r before it,
// dropped); a line longer than logLineMax is cut into P entries; a last line
// without a newline is written with tag P.
func (l *criLog) copyStream(stream string, r io.Reader) {
	br := bufio.NewReaderSize(r, logLineMax)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			line = line[:len(line)-1]
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			l.entry(stream, logTagFull, line)
		case errors.Is(err, bufio.ErrBufferFull):
			l.entry(stream, logTagPartial, line)
		default:
			if len(line) > 0 {
				l.entry(stream, logTagPartial, line)
			}
			return
		}
	}
}
