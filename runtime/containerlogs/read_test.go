package containerlogs

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/syncbuf"

	"github.com/jetlet/jetlet/test/poll"
)

// writeFile writes a CRI log file, gzipped when its name ends in .gz.
func writeFile(t *testing.T, path string, entries ...string) {
	t.Helper()
	data := []byte(strings.Join(entries, "\n") + "\n")
	if strings.HasSuffix(path, ".gz") {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(data)
		zw.Close()
		data = b.Bytes()
	}
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, path string, opts ReadOptions) string {
	t.Helper()
	var b bytes.Buffer
	if err := Read(t.Context(), path, opts, bufio.NewWriter(&b)); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	writeFile(t, path+".20261130-100000.000000000.gz",
		"2026-11-30T10:00:00.000000001Z stdout F one",
		"2026-11-30T10:00:01.000000000Z stderr P tw",
		"2026-11-30T10:00:01.500000000Z stdout F three")
	writeFile(t, path+".20261130-100002.000000000",
		"2026-11-30T10:00:02.000000000Z stderr F o",
		"not an entry",
		"2026-11-30T10:00:03.000000000Z stdout F four")
	writeFile(t, path,
		"2026-11-30T10:00:04.000000000Z stdout F",
		"2026-11-30T10:00:05.000000000Z stdout F five")
	tail2, tail0 := int64(2), int64(0)
	tests := []struct {
		name string
		opts ReadOptions
		want string
	}{
		{"all", ReadOptions{Tail: -1}, "one\ntwo\nthree\nfour\n\nfive\n"},
		{"tail", ReadOptions{Tail: tail2}, "\nfive\n"},
		{"tail 0", ReadOptions{Tail: tail0}, ""},
		{"since", ReadOptions{Tail: -1, Since: time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC)}, "two\nthree\nfour\n\nfive\n"},
		{"timestamps", ReadOptions{Tail: 1, Timestamps: true}, "2026-11-30T10:00:05.000000000Z five\n"},
		{"partial joined, timed by its first entry", ReadOptions{Tail: -1, Timestamps: true, Since: time.Date(2026, 11, 30, 10, 0, 1, 0, time.UTC)},
			"2026-11-30T10:00:01.000000000Z two\n2026-11-30T10:00:01.500000000Z three\n2026-11-30T10:00:03.000000000Z four\n2026-11-30T10:00:04.000000000Z \n2026-11-30T10:00:05.000000000Z five\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := readAll(t, path, tt.opts); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A writer that copies each stream in a goroutine of its own (containerd)
// may write a line after one of the other stream written later: the lines
// come out by their times, each stream in its own order.
func TestReadMergesTheStreamsByTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	writeFile(t, path,
		"2026-11-30T10:00:00.000000002Z stdout F o1",
		"2026-11-30T10:00:00.000000003Z stdout F o2",
		"2026-11-30T10:00:00.000000001Z stderr F e1",
		"2026-11-30T10:00:00.000000004Z stderr F e2",
		"2026-11-30T10:00:00.000000005Z stdout F o3",
		"2026-11-30T10:00:00.000000005Z stderr F e3")
	if got := readAll(t, path, ReadOptions{Tail: -1}); got != "e1\no1\no2\ne2\no3\ne3\n" {
		t.Errorf("got %q", got)
	}
	if got := readAll(t, path, ReadOptions{Tail: 3}); got != "e2\no3\ne3\n" {
		t.Errorf("tail 3: got %q", got)
	}
}

func TestReadCutsEndlessPartialLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	piece := strings.Repeat("x", 16<<10)
	var entries []string
	for range 2*MaxLine/len(piece) + 1 {
		entries = append(entries, "2026-11-30T10:00:00Z stdout P "+piece)
	}
	writeFile(t, path, append(entries, "2026-11-30T10:00:00Z stdout F end")...)
	lines := strings.Split(readAll(t, path, ReadOptions{Tail: -1}), "\n")
	if len(lines) != 4 || len(lines[0]) != MaxLine || len(lines[1]) != MaxLine || lines[2] != piece+"end" {
		t.Fatalf("got %d lines, want two of %d bytes, the rest with its end, and nothing after", len(lines), MaxLine)
	}
}

// syncBuffer is a Sink two goroutines share.
type syncBuffer struct{ syncbuf.Buffer }

func (*syncBuffer) Flush() error { return nil }

func TestReadFollowsAcrossRotationUntilExit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	rt := &fileRuntime{path: path}
	m := newTestRotator(t, rt, 1, 5)
	writeFile(t, path, "2026-11-30T10:00:00Z stdout F before")
	exited := make(chan struct{})
	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- Read(t.Context(), path, ReadOptions{Tail: -1, Follow: true, Exited: exited, Poll: time.Millisecond}, &out)
	}()
	waitFor := func(want string) {
		t.Helper()
		poll.Until(t, 10*time.Second, func() string { return "output " + want + ", have " + out.String() }, func() bool { return out.String() == want })
	}
	waitFor("before\n")
	rt.write(t, "2026-11-30T10:00:01Z stdout P grow", len("2026-11-30T10:00:01Z stdout P grow"))
	rt.write(t, "\n2026-11-30T10:00:01Z stdout F ing\n", len("\n2026-11-30T10:00:01Z stdout F ing\n"))
	waitFor("before\ngrowing\n")
	if err := m.RotateAll(t.Context()); err != nil || rt.reopens != 1 {
		t.Fatalf("rotate: %v, %d reopens", err, rt.reopens)
	}
	rt.write(t, "2026-11-30T10:00:02Z stdout F after\n", len("2026-11-30T10:00:02Z stdout F after\n"))
	waitFor("before\ngrowing\nafter\n")
	rt.write(t, "2026-11-30T10:00:03Z stdout F last\n", len("2026-11-30T10:00:03Z stdout F last\n"))
	close(exited)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "before\ngrowing\nafter\nlast\n" {
		t.Fatalf("got %q", got)
	}
}

func TestReadFollowEndsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Read(ctx, path, ReadOptions{Tail: -1, Follow: true, Poll: time.Millisecond}, &syncBuffer{})
	}()
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Read = %v, want context.Canceled", err)
	}
}
