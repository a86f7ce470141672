// Package leftovers finds the pod shims, processes and mounts a test left.
// Pods outlive jetlet by design, so a test that starts one must end it; a
// test's cleanup calls KillShims on the directory it gave the runtime, which
// fails the test by name when a shim is still there, and ends the shim so
// that it does not outlive the run. KillMarked does the same for the
// processes a harness started with a marker in their environment (a test
// control plane's, test/kubetest).
package leftovers

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jetlet/jetlet/internal/mountinfo"
)

// Shims returns the pod shims whose state dir is under dir: pid -> state dir.
func Shims(dir string) map[int]string {
	return marked("JETLET_PROC_SHIM_DIR", dir, []byte("JETLET_PROC_SHIM=pod\x00"))
}

// Marked returns the processes whose environment variable key names dir or
// a path under it: pid -> that path.
func Marked(key, dir string) map[int]string {
	return marked(key, dir, nil)
}

// marked is Marked of the processes whose environment also holds also.
func marked(key, dir string, also []byte) map[int]string {
	dir = filepath.Clean(dir)
	prefix := dir + string(filepath.Separator)
	entries, _ := os.ReadDir("/proc")
	found := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, also) {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := strings.CutPrefix(string(kv), key+"="); ok && (filepath.Clean(v) == dir || strings.HasPrefix(filepath.Clean(v), prefix)) {
				found[pid] = v
			}
		}
	}
	return found
}

// KillMarked fails t for each process still running that Marked finds, and
// kills it.
func KillMarked(t testing.TB, key, dir string) {
	t.Helper()
	for pid, v := range Marked(key, dir) {
		t.Errorf("the test left a process running (pid %d, %s=%s): killed", pid, key, v)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// KillShims fails t for each pod shim left running under dir, and kills it
// (its pod goes with it: the shim is the pod's PID 1).
func KillShims(t testing.TB, dir string) {
	t.Helper()
	for pid, state := range Shims(dir) {
		t.Errorf("the test left a pod shim running (pid %d, %s): killed", pid, state)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Unmount unmounts every mount at or below dir (what jetlet mounted for
// pods: subPath binds, tmpfs volumes), the latest first, so that removing
// dir never goes through one.
func Unmount(t testing.TB, dir string) {
	t.Helper()
	mounts, err := mountinfo.Under(dir)
	if err != nil {
		t.Errorf("leftover mounts: %v", err)
	}
	slices.Reverse(mounts)
	for _, mp := range mounts {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mp, err)
		}
	}
}
