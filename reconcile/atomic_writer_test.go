package reconcile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// entries lists a directory's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// generations are the timestamped directories of a volume.
func generations(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, n := range entries(t, dir) {
		if strings.HasPrefix(n, "..") && n != dataDirName {
			out = append(out, n)
		}
	}
	return out
}

func readVolumeFile(t *testing.T, dir, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// kubelet's layout: the files in a ..<time>.<random> generation, ..data a
// symlink to it, each top-level name a symlink through ..data; an equal
// payload writes nothing; a new one is a new generation, the old one and the
// names the payload lost are gone.
func TestAtomicWriterLayoutAndUpdates(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	w := atomicWriter{dir: dir, now: now}
	first := map[string]fileProjection{
		"a":           {data: []byte("one"), mode: 0o644},
		"sub/dir/b":   {data: []byte("two"), mode: 0o400},
		"./c/../cc":   {data: []byte("three"), mode: 0o600},
		"binary.data": {data: []byte{0, 1, 2}, mode: 0o644},
	}
	wrote, err := w.write(first)
	if err != nil || !wrote {
		t.Fatalf("first write: %v %v", wrote, err)
	}
	gens := generations(t, dir)
	if len(gens) != 1 || !strings.HasPrefix(gens[0], "..2026_03_04_05_06_07.") {
		t.Fatalf("generations %v, want one named for the clock's time", gens)
	}
	if target, _ := os.Readlink(filepath.Join(dir, dataDirName)); target != gens[0] {
		t.Fatalf("..data -> %q, want %q", target, gens[0])
	}
	for name, want := range map[string]string{"a": "..data/a", "sub": "..data/sub", "cc": "..data/cc", "binary.data": "..data/binary.data"} {
		if target, err := os.Readlink(filepath.Join(dir, name)); err != nil || target != want {
			t.Errorf("%s -> %q (%v), want %q", name, target, err, want)
		}
	}
	if got := readVolumeFile(t, dir, "sub/dir/b"); got != "two" {
		t.Errorf("sub/dir/b = %q", got)
	}
	for p, mode := range map[string]os.FileMode{"a": 0o644, "sub/dir/b": 0o400, "cc": 0o600} {
		if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, mode)
		}
	}

	// The same payload: nothing written.
	w.now = now.Add(time.Minute)
	if wrote, err := w.write(first); err != nil || wrote {
		t.Fatalf("unchanged payload: wrote %v, %v", wrote, err)
	}
	if got := generations(t, dir); !slices.Equal(got, gens) {
		t.Fatalf("generations after an equal payload %v, want %v", got, gens)
	}
	// A mode alone changes: a new generation.
	first["a"] = fileProjection{data: []byte("one"), mode: 0o640}
	if wrote, err := w.write(first); err != nil || !wrote {
		t.Fatalf("changed mode: wrote %v, %v", wrote, err)
	}

	// A new payload without sub/ and cc: those names go, a stays a link.
	second := map[string]fileProjection{"a": {data: []byte("four"), mode: 0o644}, "d": {data: []byte("five"), mode: 0o644}}
	w.now = now.Add(2 * time.Minute)
	if wrote, err := w.write(second); err != nil || !wrote {
		t.Fatalf("second write: %v %v", wrote, err)
	}
	got := entries(t, dir)
	slices.Sort(got)
	newGens := generations(t, dir)
	current, _ := os.Readlink(filepath.Join(dir, dataDirName))
	if len(newGens) != 2 || !strings.HasPrefix(current, "..2026_03_04_05_08_07.") || !slices.Contains(newGens, current) {
		t.Fatalf("generations %v (..data: %s), want the new one and the one before it", newGens, current)
	}
	want := append([]string{dataDirName, "a", "d"}, newGens...)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("volume holds %v, want %v", got, want)
	}
	if got := readVolumeFile(t, dir, "a"); got != "four" {
		t.Errorf("a = %q after the update", got)
	}
}

// A crash can leave a ..data_tmp link and a generation ..data does not name:
// the next write goes through and removes them.
func TestAtomicWriterCleansWhatACrashLeft(t *testing.T) {
	dir := t.TempDir()
	w := atomicWriter{dir: dir, now: time.Now()}
	if _, err := w.write(map[string]fileProjection{"a": {data: []byte("1"), mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "..2000_01_01_00_00_00.123"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..2000_01_01_00_00_00.123", filepath.Join(dir, newDataDirName)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.write(map[string]fileProjection{"a": {data: []byte("2"), mode: 0o644}}); err != nil {
		t.Fatal(err)
	}
	if got := entries(t, dir); len(got) != 4 || slices.Contains(got, "..2000_01_01_00_00_00.123") || slices.Contains(got, newDataDirName) {
		t.Fatalf("volume holds %v, want ..data, the new generation and the one before it, and a", got)
	}
	if got := readVolumeFile(t, dir, "a"); got != "2" {
		t.Errorf("a = %q", got)
	}
}

func TestAtomicWriterRefusesPathsOutsideTheVolume(t *testing.T) {
	for _, p := range []string{"", "/etc/passwd", "../x", "a/../../x", "..data", "..x/y", ".", "a/.."} {
		w := atomicWriter{dir: t.TempDir(), now: time.Now()}
		if _, err := w.write(map[string]fileProjection{p: {data: []byte("x"), mode: 0o644}}); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
}

// A reader looping on the files while generations are swapped under it
// always finds each file, whole: never missing, never half written. The
// writer keeps the generation before the current one for readers in
// flight, so a read may overlap one swap (kubelet's AtomicWriter keeps
// none): each generation is written once a read begun after the last one
// has ended, which a loaded machine could otherwise starve.
func TestAtomicWriterReaderNeverSeesAHalfState(t *testing.T) {
	dir := t.TempDir()
	w := atomicWriter{dir: dir, now: time.Now()}
	content := func(gen int) []byte { return bytes.Repeat([]byte(strconv.Itoa(gen%10)), 64<<10) }
	payload := func(gen int) map[string]fileProjection {
		return map[string]fileProjection{"a": {data: content(gen), mode: 0o644}, "sub/b": {data: content(gen), mode: 0o644}}
	}
	if _, err := w.write(payload(0)); err != nil {
		t.Fatal(err)
	}
	var written atomic.Int64 // the last generation written
	// passed carries the generation written when a pass over the files that
	// has ended began; stopped closes when the reader ends.
	passed, stopped := make(chan int64, 1), make(chan struct{})
	done := make(chan struct{})
	var readErr error
	reads := 0
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
			}
			began := written.Load()
			for _, p := range []string{"a", "sub/b"} {
				b, err := os.ReadFile(filepath.Join(dir, p))
				if err != nil {
					readErr = err
					return
				}
				if len(b) != 64<<10 || bytes.Count(b, b[:1]) != len(b) {
					readErr = errors.New(p + " read torn")
					return
				}
				reads++
			}
			select {
			case passed <- began:
			default:
			}
		}
	}()
write:
	for gen := int64(1); gen <= 200; gen++ {
		if _, err := w.write(payload(int(gen))); err != nil {
			t.Fatal(err)
		}
		written.Store(gen)
		for began := int64(-1); began < gen; {
			select {
			case began = <-passed:
			case <-stopped:
				break write // the reader failed: its error is reported below
			}
		}
	}
	close(done)
	<-stopped
	if readErr != nil {
		t.Fatalf("after %d good reads: %v", reads, readErr)
	}
	if got := generations(t, dir); len(got) != 2 {
		t.Errorf("generations left: %v, want the current and the one before it", got)
	}
	if _, err := os.Lstat(filepath.Join(dir, newDataDirName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("..data_tmp left: %v", err)
	}
}

// With an fsGroup, a generation is the group's and group-readable (kubelet's
// SetVolumeOwnership of a read-only volume); directories setgid.
func TestAtomicWriterFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files to another group needs root")
	}
	dir := t.TempDir()
	gid := int64(4321)
	w := atomicWriter{dir: dir, gid: &gid, now: time.Now()}
	if _, err := w.write(map[string]fileProjection{"a": {data: []byte("x"), mode: 0o400}, "s/b": {data: []byte("y"), mode: 0o600}}); err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{"a": 0o440, "s/b": 0o640, "s": os.ModeDir | os.ModeSetgid | 0o755} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), mode)
		}
		if g := fileGID(fi); g != gid {
			t.Errorf("%s: group %d, want %d", p, g, gid)
		}
	}
	// Unchanged payload, unchanged generation: the fsGroup's mode counts.
	if wrote, err := w.write(map[string]fileProjection{"a": {data: []byte("x"), mode: 0o400}, "s/b": {data: []byte("y"), mode: 0o600}}); err != nil || wrote {
		t.Errorf("unchanged payload with an fsGroup: wrote %v, %v", wrote, err)
	}
}

func fileGID(fi os.FileInfo) int64 { return int64(fi.Sys().(*syscall.Stat_t).Gid) }
