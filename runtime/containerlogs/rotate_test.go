package containerlogs

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fileRuntime runs one container whose log is a real file: Reopen creates
// the file again, as a runtime does after a rotation.
type fileRuntime struct {
	path      string
	reopenErr error
	reopens   int
	id        string // the container's id; "" is c1
	statuses  int    // ContainerStatus calls
}

func (r *fileRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	return []*runtimeapi.Container{{Id: cmp.Or(r.id, "c1"), State: runtimeapi.ContainerState_CONTAINER_RUNNING}}, nil
}

func (r *fileRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.statuses++
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, LogPath: r.path}}, nil
}

func (r *fileRuntime) ReopenContainerLog(context.Context, string) error {
	if r.reopenErr != nil {
		return r.reopenErr
	}
	r.reopens++
	return os.WriteFile(r.path, nil, 0o640)
}

// write appends n bytes of line to the current log.
func (r *fileRuntime) write(t *testing.T, line string, n int) {
	t.Helper()
	f, err := os.OpenFile(r.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Repeat(line, n/len(line))); err != nil {
		t.Fatal(err)
	}
}

func newTestRotator(t *testing.T, rt Runtime, maxSize int64, maxFiles int) *Rotator {
	t.Helper()
	m, err := New(rt, Config{MaxSize: maxSize, MaxFiles: maxFiles, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	return m
}

func TestALogIsRotatedOnlyOnceItOutgrowsMaxSize(t *testing.T) {
	rt := &fileRuntime{path: filepath.Join(t.TempDir(), "0.log")}
	m := newTestRotator(t, rt, 1000, 5)
	rt.write(t, "x\n", 998)
	if err := m.RotateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if files, _ := Files(rt.path); rt.reopens != 0 || len(files) != 1 {
		t.Fatalf("under the size: %d reopens, files %v; want none and the log alone", rt.reopens, files)
	}
	rt.write(t, "x\n", 2)
	if err := m.RotateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	files, _ := Files(rt.path)
	if rt.reopens != 1 || len(files) != 2 || files[1] != rt.path {
		t.Fatalf("at the size: %d reopens, files %v; want one rotation, then the log", rt.reopens, files)
	}
}

// A container's log path is asked of the runtime once: a round over a
// node's containers asks only for those it has not seen running before.
func TestARoundAsksOnlyNewContainersForTheirLogPath(t *testing.T) {
	rt := &fileRuntime{path: filepath.Join(t.TempDir(), "0.log")}
	m := newTestRotator(t, rt, 1000, 5)
	for round := range 3 {
		if round == 2 {
			rt.id = "c2" // c1 is gone, c2 runs
		}
		rt.write(t, "x\n", 1000)
		if err := m.RotateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if rt.statuses != 2 || rt.reopens != 3 {
		t.Errorf("%d status calls and %d rotations in 3 rounds of one container, then another; want 2 and 3", rt.statuses, rt.reopens)
	}
}

// Many rotations leave MaxFiles files: the current one, the newest rotated
// one as it was, the others compressed; the oldest are gone, and what is
// left reads back in order.
func TestRotationsKeepMaxFilesAndCompressAllButTheNewest(t *testing.T) {
	rt := &fileRuntime{path: filepath.Join(t.TempDir(), "0.log")}
	m := newTestRotator(t, rt, 100, 4)
	for i := range 10 {
		rt.write(t, string(rune('a'+i))+"\n", 100)
		if err := m.RotateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	rt.write(t, "k\n", 10)
	files, err := Files(rt.path)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("files %v, want 4", files)
	}
	var all bytes.Buffer
	for i, f := range files {
		compressed := strings.HasSuffix(f, ".gz")
		if want := i < 2; compressed != want {
			t.Errorf("%s compressed %t, want %t (all but the newest rotated and the current)", f, compressed, want)
		}
		all.Write(readLog(t, f))
	}
	// Rotations 7 (h), 8 (i), 9 (j) and the current file (k).
	want := strings.Repeat("h\n", 50) + strings.Repeat("i\n", 50) + strings.Repeat("j\n", 50) + strings.Repeat("k\n", 5)
	if all.String() != want {
		t.Errorf("the files read back %q..., want h, i, j then k", all.String()[:10])
	}
}

// A runtime that cannot reopen keeps writing to the file it has: the file
// goes back where it was, and nothing is lost.
func TestAFailedReopenPutsTheLogBack(t *testing.T) {
	rt := &fileRuntime{path: filepath.Join(t.TempDir(), "0.log"), reopenErr: errors.New("reopen refused")}
	m := newTestRotator(t, rt, 10, 5)
	rt.write(t, "x\n", 20)
	if err := m.RotateAll(t.Context()); err == nil || !strings.Contains(err.Error(), "reopen refused") {
		t.Fatalf("RotateAll = %v, want the reopen error", err)
	}
	if files, _ := Files(rt.path); len(files) != 1 || files[0] != rt.path || len(readLog(t, rt.path)) != 20 {
		t.Errorf("files %v, want the log alone, whole", files)
	}
}

// What a crash during a compression leaves is cleaned up by the next
// rotation, and never listed.
func TestAnInterruptedCompressionIsCleanedUp(t *testing.T) {
	dir := t.TempDir()
	rt := &fileRuntime{path: filepath.Join(dir, "0.log")}
	m := newTestRotator(t, rt, 10, 5)
	for _, f := range []string{"0.log.20250101-000000.000000000.gz.tmp", "0.log.20250101-000001.000000000", "0.log.20250101-000001.000000000.gz"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	rt.write(t, "x\n", 20)
	if files, _ := Files(rt.path); len(files) != 2 || !strings.HasSuffix(files[0], "000001.000000000.gz") {
		t.Errorf("Files = %v, want the complete .gz and the log", files)
	}
	if err := m.RotateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("after a rotation the directory holds %v; want the old .gz, the rotated log, the new log", entries)
	}
}

func TestRemoveTakesTheRotatedFilesToo(t *testing.T) {
	dir := t.TempDir()
	rt := &fileRuntime{path: filepath.Join(dir, "0.log")}
	m := newTestRotator(t, rt, 10, 5)
	for range 3 {
		rt.write(t, "x\n", 20)
		if err := m.RotateAll(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	other := filepath.Join(dir, "1.log") // another instance's log stays
	if err := os.WriteFile(other, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := Remove(rt.path); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "1.log" {
		t.Errorf("after Remove the directory holds %v, want 1.log alone", entries)
	}
}

func TestConfigIsChecked(t *testing.T) {
	for _, cfg := range []Config{{MaxSize: 0, MaxFiles: 5}, {MaxSize: 1, MaxFiles: 1}, {MaxSize: 1, MaxFiles: 2, Interval: -time.Second}} {
		if _, err := New(&fileRuntime{}, cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

func readLog(t *testing.T, f string) []byte {
	t.Helper()
	r, err := Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	return data
}
