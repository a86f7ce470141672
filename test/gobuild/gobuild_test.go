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

// A Cached command is built once into the cache and found there by the
// next process; a change to its module's files is another key, another
// build.
func TestCachedBuildsOncePerModuleContent(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(CacheEnv, cache)
	module := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(module, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module tiny\n\ngo 1.26\n")
	write("main.go", "package main\n\nfunc main() { println(\"one\") }\n")
	first := (&Command{Pkg: ".", Name: "tiny", Module: module, Cached: true}).Path(t)
	if !strings.HasPrefix(first, cache+string(filepath.Separator)) {
		t.Fatalf("Path = %s, want it in the cache %s", first, cache)
	}
	// The next process's Command: the cached binary, not a new build (a
	// build would replace it, a new inode).
	before, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	if again := (&Command{Pkg: ".", Name: "tiny", Module: module, Cached: true}).Path(t); again != first {
		t.Errorf("second Path = %s, want the cached %s", again, first)
	}
	if after, err := os.Stat(first); err != nil || !os.SameFile(before, after) {
		t.Errorf("the cached binary was rebuilt (%v)", err)
	}
	write("main.go", "package main\n\nfunc main() { println(\"two\") }\n")
	changed := (&Command{Pkg: ".", Name: "tiny", Module: module, Cached: true}).Path(t)
	if changed == first {
		t.Fatalf("Path after a change = %s, the old key's", changed)
	}
	if out, err := exec.Command(changed).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "two" {
		t.Errorf("the new build prints %q (%v), want two", out, err)
	}
}

// Cached needs a Module to key on.
func TestCachedWithoutModuleRefused(t *testing.T) {
	t.Setenv(CacheEnv, t.TempDir())
	if _, err := (&Command{Pkg: ".", Name: "x", Cached: true}).cached(t.TempDir()); err == nil || !strings.Contains(err.Error(), "without a Module") {
		t.Errorf("cached without Module: %v", err)
	}
}
