package embedded

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func startLockWatch(t *testing.T) *lockWatch {
	t.Helper()
	w, err := newLockWatch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.close)
	return w
}

// holdLock takes the flock on path through an open of its own (read-write,
// as a shim does), and returns that file: closing it releases the lock.
func holdLock(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func awaitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not released within 10s", what)
	}
}

func TestLockWatchTellsAReleaseToEveryWaiter(t *testing.T) {
	w := startLockWatch(t)
	path := filepath.Join(t.TempDir(), "shim.lock")
	holder := holdLock(t, path)
	first, second := w.released(path), w.released(path)
	if isClosed(first) || isClosed(second) {
		t.Fatal("released while the lock is held")
	}
	if !shimAlive(path) || isClosed(first) {
		t.Fatal("a check of the lock was taken for its release")
	}
	holder.Close()
	awaitClosed(t, first, "first waiter")
	awaitClosed(t, second, "second waiter")
	// The lock can be taken and watched again.
	holder = holdLock(t, path)
	again := w.released(path)
	if isClosed(again) {
		t.Fatal("released while the lock is held again")
	}
	holder.Close()
	awaitClosed(t, again, "waiter of the second holder")
}

func TestLockWatchReleasesAtOnceAFreeOrMissingLock(t *testing.T) {
	w := startLockWatch(t)
	dir := t.TempDir()
	free := filepath.Join(dir, "free.lock")
	holdLock(t, free).Close()
	if !isClosed(w.released(free)) {
		t.Error("a free lock is not released at once")
	}
	if !isClosed(w.released(filepath.Join(dir, "missing.lock"))) {
		t.Error("a missing lock file is not released at once")
	}
}

func TestLockWatchSeesAKilledHolder(t *testing.T) {
	w := startLockWatch(t)
	path := filepath.Join(t.TempDir(), "shim.lock")
	// A shell opens the lock read-write on fd 9, locks it and sleeps with it.
	cmd := exec.Command("/bin/sh", "-c", `exec 9<>"$0"; flock -n 9 || exit 1; echo locked; exec sleep 600`, path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if _, err := out.Read(make([]byte, 7)); err != nil {
		t.Fatal(err)
	}
	ch := w.released(path)
	if isClosed(ch) {
		t.Fatal("released while the holder runs")
	}
	_ = cmd.Process.Kill()
	awaitClosed(t, ch, "killed holder")
}

func TestLockWatchHoldsNoThreadPerWaiter(t *testing.T) {
	w := startLockWatch(t)
	dir := t.TempDir()
	const locks = 200
	threads := pprof.Lookup("threadcreate").Count()
	holders := make([]*os.File, locks)
	waits := make([]<-chan struct{}, locks)
	for i := range locks {
		path := filepath.Join(dir, strconv.Itoa(i))
		holders[i] = holdLock(t, path)
		waits[i] = w.released(path)
	}
	if grown := pprof.Lookup("threadcreate").Count() - threads; grown > locks/4 {
		t.Errorf("%d threads more while waiting for %d locks", grown, locks)
	}
	for i := range locks {
		holders[i].Close()
		awaitClosed(t, waits[i], holders[i].Name())
	}
}
