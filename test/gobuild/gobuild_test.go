package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// With PrebuiltEnv set, Path is the binary in that directory, built or not.
func TestPrebuiltDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(PrebuiltEnv, dir)
	there := &Command{Pkg: "example.invalid/nothing", Name: "there"}
	if err := os.WriteFile(filepath.Join(dir, "there"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := there.Path(t); got != filepath.Join(dir, "there") {
		t.Errorf("Path = %s, want the prebuilt one", got)
	}
	if _, err := prebuilt(dir, "missing"); err == nil || !strings.Contains(err.Error(), PrebuiltEnv) {
		t.Errorf("a missing prebuilt command: %v, want an error naming %s", err, PrebuiltEnv)
	}
}
