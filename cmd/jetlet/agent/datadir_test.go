package agent

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A test binary run with lockHolderEnv set to a data dir is a process that
// holds that dir's lock (TestLockHolder) until its stdin closes.
const lockHolderEnv = "JETLET_TEST_LOCK_HOLDER_DIR"

// TestLockHolder is the lock-holding process of TestDataDirLock: it locks
// the data dir, says so on stdout, and exits when its stdin closes.
func TestLockHolder(t *testing.T) {
	dir := os.Getenv(lockHolderEnv)
	if dir == "" {
		t.Skip("the process TestDataDirLock starts")
	}
	lock, err := lockDataDir(dir)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("locked")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	lock.Close()
	os.Exit(0)
}

// startLockHolder starts a process holding dir's lock and returns it once
// the lock is held; closing stop ends it.
func startLockHolder(t *testing.T, dir string) (pid int, stop func()) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolder$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Errorf("lock holder: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if line != "locked\n" {
		t.Fatalf("lock holder said %q (%v), want locked", line, err)
	}
	return cmd.Process.Pid, stop
}

// The data dir's lock: held by another process, it is refused naming that
// process's pid, and the file is left as it is; released (the holder
// exited, or closed it), it is taken again, the file rewritten with the new
// holder's pid, mode 0600.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, lockFile)
	pid, stop := startLockHolder(t, dir)
	before, err := os.ReadFile(path)
	if err != nil || string(before) != strconv.Itoa(pid)+"\n" {
		t.Fatalf("lock file of the holder: %q, %v; want its pid %d", before, err, pid)
	}
	want := fmt.Sprintf("--data-dir %s is in use by another jetlet run (pid %d); stop it first", dir, pid)
	if f, err := lockDataDir(dir); err == nil || err.Error() != want {
		f.Close()
		t.Fatalf("lock of a held data dir: %v, want %q", err, want)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the refused lock changed the file: %q, was %q", after, before)
	}
	stop() // the holder exits: the kernel releases its lock

	lock, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after the holder exited: %v", err)
	}
	wantLockFile(t, path, os.Getpid())
	// Within one process too, a second lock is refused (flock locks an open
	// file, not a process), naming this process.
	want = fmt.Sprintf("(pid %d)", os.Getpid())
	if f, err := lockDataDir(dir); err == nil || !strings.Contains(err.Error(), want) {
		f.Close()
		t.Fatalf("second lock: %v, want refused naming %s", err, want)
	}
	lock.Close()
	lock, err = lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after it was released: %v", err)
	}
	lock.Close()

	// A file a dead holder left, with a longer pid and another mode, is
	// taken over and rewritten.
	if err := os.WriteFile(path, []byte("123456789\nmore\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	lock, err = lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock over a dead holder's file: %v", err)
	}
	defer lock.Close()
	wantLockFile(t, path, os.Getpid())
}

func wantLockFile(t *testing.T, path string, pid int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || string(b) != strconv.Itoa(pid)+"\n" {
		t.Errorf("lock file holds %q, %v; want pid %d", b, err, pid)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode() != 0o600 {
		t.Errorf("lock file mode %v, %v; want 0600", fi.Mode(), err)
	}
}

// A new data dir is made 0700 (missing parents 0755); an existing one is
// closed to 0700, saying what it was; one already 0700 is left alone.
func TestDataDirIsClosedToOtherUsers(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "parent", "data")
	if err := makeDataDir(dir); err != nil {
		t.Fatal(err)
	}
	wantMode(t, filepath.Dir(dir), os.ModeDir|0o755)
	wantMode(t, dir, os.ModeDir|0o700)
	if err := makeDataDir(dir); err != nil {
		t.Errorf("make an existing data dir: %v", err)
	}
	if was, err := closeDataDir(dir); err != nil || was != 0 {
		t.Errorf("close a 0700 data dir: was %o, %v; want nothing done", was, err)
	}
	for _, mode := range []os.FileMode{0o755, 0o777 | os.ModeSticky, 0o750 | os.ModeSetgid} {
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		was, err := closeDataDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		wantWas := uint32(mode.Perm())
		if mode&os.ModeSticky != 0 {
			wantWas |= 0o1000
		}
		if mode&os.ModeSetgid != 0 {
			wantWas |= 0o2000
		}
		if was != wantWas {
			t.Errorf("closing a data dir of mode %v: was %04o, want %04o", mode, was, wantWas)
		}
		wantMode(t, dir, os.ModeDir|0o700)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := closeDataDir(file); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("close a file as the data dir: %v", err)
	}
}

func wantMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode() != mode {
		t.Errorf("%s is %v, want %v", path, fi.Mode(), mode)
	}
}

func TestClaimDataDir(t *testing.T) {
	dir := t.TempDir()
	if from, err := claimDataDir(dir, "n1", false); err != nil || from != "" {
		t.Fatalf("first claim: %q, %v", from, err)
	}
	if _, err := claimDataDir(dir, "n1", false); err != nil {
		t.Errorf("claim by the same node: %v", err)
	}
	if _, err := claimDataDir(dir, "n2", false); err == nil || !strings.Contains(err.Error(), `belongs to node "n1", not "n2"`) {
		t.Errorf("claim by another node: %v", err)
	}
	wantNodeFile(t, dir, "n1")
	if from, err := claimDataDir(dir, "n2", true); err != nil || from != "n1" {
		t.Errorf("rename: %q, %v; want from n1", from, err)
	}
	wantNodeFile(t, dir, "n2")
	if err := os.WriteFile(filepath.Join(dir, nodeFile), []byte("Not A Node\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := claimDataDir(dir, "n2", true); err == nil || !strings.Contains(err.Error(), "not a node name") {
		t.Errorf("claim of a data dir whose node file is damaged: %v", err)
	}
}

// wantNodeFile checks the file in which the data dir records its node.
func wantNodeFile(t *testing.T, dataDir, node string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, nodeFile))
	if err != nil || string(b) != node+"\n" {
		t.Errorf("data dir's node file holds %q, %v; want %q", b, err, node+"\n")
	}
}
