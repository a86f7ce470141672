package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/schemas"
)

// nodeFile, in the data dir, holds the name of the node the data dir
// belongs to (docs/contract.md section 7).
const nodeFile = "node"

// lockFile, in the data dir, is locked (flock) by the `jetlet run` that uses
// the data dir, for as long as it runs, and holds its pid.
const lockFile = "lock"

// dataDirMode is the data dir's: nothing under it is other users' business
// (docs/security.md).
const dataDirMode = 0o700

// makeDataDir creates dir, mode 0700 (its missing parents 0755), unless it
// exists.
func makeDataDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	if err := os.Mkdir(dir, dataDirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("--data-dir: %w", err)
	}
	return nil
}

// closeDataDir makes dir mode 0700: other users may neither list it nor
// reach anything under it, whatever the modes below. When it had another
// mode (permissions, setuid, setgid, sticky), it returns that one.
func closeDataDir(dir string) (was uint32, err error) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return 0, fmt.Errorf("--data-dir: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, fmt.Errorf("--data-dir %s is not a directory", dir)
	}
	if st.Mode&0o7777 == dataDirMode {
		return 0, nil
	}
	if err := unix.Chmod(dir, dataDirMode); err != nil {
		return 0, fmt.Errorf("--data-dir: chmod %s: %w", dir, err)
	}
	return st.Mode & 0o7777, nil
}

// lockDataDir takes the data dir's exclusive lock, an flock of
// <dir>/lock, without waiting, and writes this process's pid in the file. The
// lock is held until the returned file is closed, or the process ends: a
// jetlet that dies releases it, whatever it leaves in the file. A data dir
// another process holds is refused, naming the pid it wrote. Two jetlets on
// one data dir would share the JetStream store and adopt each other's
// containers.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	// Go opens it close-on-exec: the pods' shims, which outlive jetlet, do
	// not hold it.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--data-dir: lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("--data-dir %s is in use by another jetlet run (%s); stop it first", dir, holder(f))
		}
		return nil, fmt.Errorf("--data-dir: lock %s: %w", path, err)
	}
	// The pid first, then the length: a refused jetlet reading it meanwhile
	// finds a whole pid on the first line (ours, or before the write, the
	// previous holder's), never an empty file.
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if _, err := f.WriteAt(pid, 0); err == nil {
		err = f.Truncate(int64(len(pid)))
	}
	if err == nil {
		err = f.Chmod(0o600) // a file that was there may have had another mode
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("--data-dir: lock %s: %w", path, err)
	}
	return f, nil
}

// holder says which process holds the lock, from the pid on the first line
// of the lock file.
func holder(f *os.File) string {
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	line, _, _ := strings.Cut(string(b[:n]), "\n")
	if pid, err := strconv.Atoi(strings.TrimSpace(line)); err == nil && pid > 0 {
		return "pid " + strconv.Itoa(pid)
	}
	return "pid unknown: " + f.Name() + " names none yet"
}

// claimDataDir makes dir node's data dir: on first use it records node; later
// it refuses any other node unless rename, which records the new name and
// returns the old one. The data dir's pods, logs and volumes are one node's:
// run under another name, that node would find no intent for them and kill
// them as orphans, so a changed host name (the default --node) must stop
// jetlet, not empty the node.
func claimDataDir(dir, node string, rename bool) (renamedFrom string, err error) {
	path := filepath.Join(dir, nodeFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", writeNodeFile(path, node)
	}
	if err != nil {
		return "", fmt.Errorf("--data-dir: %w", err)
	}
	recorded := strings.TrimSpace(string(data))
	switch {
	case recorded == node:
		return "", nil
	case !schemas.ValidNodeName(recorded):
		return "", fmt.Errorf("--data-dir: %s holds %q, not a node name; it records the node the data dir belongs to", path, recorded)
	case !rename:
		return "", fmt.Errorf("--data-dir %s belongs to node %q, not %q: run with --node %s, or add --rename-node to make it node %q's (see docs/running.md)",
			dir, recorded, node, recorded, node)
	}
	return recorded, writeNodeFile(path, node)
}

func writeNodeFile(path, node string) error {
	if err := atomicfile.Write(path, []byte(node+"\n"), 0o644); err != nil {
		return fmt.Errorf("--data-dir: record the node name: %w", err)
	}
	return nil
}
