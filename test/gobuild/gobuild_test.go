package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The build dirs of processes that ended are removed; the running
// process's stays.
func TestRemoveDeadBuildsKeepsTheLivingOnes(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(os.TempDir(), fmt.Sprintf("cmd-bin-%d-123", ended.Process.Pid))
	alive := filepath.Join(os.TempDir(), fmt.Sprintf("cmd-bin-%d-456", os.Getpid()))
	other := filepath.Join(os.TempDir(), fmt.Sprintf("othercmd-bin-%d-789", ended.Process.Pid))
	for _, dir := range []string{dead, alive, other} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removeDeadBuilds("cmd")
	for dir, want := range map[string]bool{dead: false, alive: true, other: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(dir), err == nil, want)
		}
	}
}
