package events

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetlet/jetlet/schemas"
)

// spool keeps the queued events on disk until the stream has stored them,
// so that a restart of jetlet, or its kill, loses none of those it queued
// while NATS was away: the next start queues them again, and the ledger lets
// through only those not stored. Segments of JSON lines, oldest first; a
// segment goes once every event in it is stored. The caller holds
// EventPublisher.spoolMu for every method.
type spool struct {
	dir string
	// cur is the segment appended to (nil until the first append after it
	// was closed); curLast the number of its last event, curBytes its size.
	cur      *os.File
	curLast  uint64
	curBytes int64
	closed   []segment // full segments, oldest first
	next     uint64    // the number of the next event appended
	name     uint64    // the number of the next segment's file
	synced   time.Time // the last fsync of cur
}

// segment is a full segment and the number of its last event.
type segment struct {
	path string
	last uint64
}

// spoolSegmentBytes is the size past which a segment is closed and a new
// one begun, so that the stored events' space is given back a segment at a
// time while NATS catches up.
const spoolSegmentBytes = 1 << 20

// spoolSyncEvery bounds how long an event waits for its fsync: a crash of
// the host (not of jetlet) loses at most that much.
const spoolSyncEvery = time.Second

// spooled is one line of a segment: a queued event's message.
type spooled struct {
	Subject string              `json:"subject"`
	Header  map[string][]string `json:"header"`
	Data    json.RawMessage     `json:"data"`
}

// openSpool reads the segments under dir (made if missing) and returns the
// spool with the events they hold, oldest first, numbered from 1.
func openSpool(dir string) (*spool, []queuedEvent, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	s := &spool{dir: dir, next: 1}
	var names []uint64
	for _, e := range entries {
		if n, err := strconv.ParseUint(strings.TrimSuffix(e.Name(), ".jsonl"), 10, 64); err == nil && strings.HasSuffix(e.Name(), ".jsonl") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var events []queuedEvent
	for _, n := range names {
		path := s.path(n)
		read, err := readSegment(path)
		if err != nil {
			return nil, nil, err
		}
		for _, e := range read {
			e.n = s.next
			s.next++
			events = append(events, e)
		}
		s.closed = append(s.closed, segment{path: path, last: s.next - 1})
		s.name = n + 1
	}
	return s, events, nil
}

// readSegment reads a segment's events; a line that does not parse (cut by
// a crash of the host) is skipped.
func readSegment(path string) ([]queuedEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []queuedEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var line spooled
		var ev schemas.LifecycleEvent
		if json.Unmarshal(sc.Bytes(), &line) != nil || json.Unmarshal(line.Data, &ev) != nil || !schemas.ValidUID(ev.UID) {
			continue
		}
		msg := nats.NewMsg(line.Subject)
		msg.Header, msg.Data = line.Header, line.Data
		out = append(out, queuedEvent{uid: ev.UID, id: ev.ID, terminal: ev.Type == schemas.EventPodTerminated, msg: msg})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

func (s *spool) path(n uint64) string { return filepath.Join(s.dir, fmt.Sprintf("%016d.jsonl", n)) }

// append writes e's message and numbers it.
func (s *spool) append(e *queuedEvent) error {
	line, err := json.Marshal(spooled{Subject: e.msg.Subject, Header: e.msg.Header, Data: e.msg.Data})
	if err != nil {
		return err
	}
	if s.cur == nil {
		if s.cur, err = os.OpenFile(s.path(s.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o600); err != nil {
			return err
		}
		s.name++
		s.curBytes = 0
	}
	if _, err := s.cur.Write(append(line, '\n')); err != nil {
		return err
	}
	e.n = s.next
	s.next++
	s.curLast, s.curBytes = e.n, s.curBytes+int64(len(line)+1)
	if time.Since(s.synced) >= spoolSyncEvery {
		s.synced = time.Now()
		if err := s.cur.Sync(); err != nil {
			return err
		}
	}
	if s.curBytes >= spoolSegmentBytes {
		return s.closeCur()
	}
	return nil
}

func (s *spool) closeCur() error {
	err := s.cur.Close()
	s.closed = append(s.closed, segment{path: s.cur.Name(), last: s.curLast})
	s.cur = nil
	return err
}

// settle drops the events numbered up to n, all stored: the segments that
// hold nothing else, and the current one's content once everything in it
// is stored.
func (s *spool) settle(n uint64) error {
	var errs []error
	for len(s.closed) > 0 && s.closed[0].last <= n {
		errs = append(errs, os.Remove(s.closed[0].path))
		s.closed = s.closed[1:]
	}
	if s.cur != nil && s.curLast <= n && s.curBytes > 0 {
		errs = append(errs, s.cur.Truncate(0))
		s.curBytes = 0
	}
	return errors.Join(errs...)
}
