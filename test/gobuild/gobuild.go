// Package gobuild builds a Go command once per test process, for tests that
// run it as a real process.
package gobuild

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Command is a Go command built on first use.
type Command struct {
	Pkg   string   // import path of its main package
	Name  string   // file name of the binary
	Flags []string // more `go build` flags
	// Beside are more main packages built (without Flags) into the same
	// directory, each named after its last path element: the helper binaries
	// a command finds next to itself.
	Beside []string
	// Static builds it with cgo off: a binary that runs in an image without
	// a C library (a container's, mounted as a volume).
	Static bool

	once sync.Once
	path string
	err  error
}

// PrebuiltEnv names a directory of commands built beforehand, each named
// by its Name (Beside's next to it): where tests run without a Go toolchain
// (test/vm's guest), Path returns the one there and builds nothing.
const PrebuiltEnv = "JETLET_GOBUILD_DIR"

// Path builds the command the first time it is asked for (go.mod's versions,
// nothing downloaded) and returns the binary's path.
func (c *Command) Path(t testing.TB) string {
	t.Helper()
	c.once.Do(func() {
		if dir := os.Getenv(PrebuiltEnv); dir != "" {
			c.path, c.err = prebuilt(dir, c.Name)
			return
		}
		removeDeadBuilds(c.Name)
		dir, err := os.MkdirTemp("", fmt.Sprintf("%s-bin-%d-", c.Name, os.Getpid()))
		if err != nil {
			c.err = err
			return
		}
		c.path = filepath.Join(dir, c.Name)
		args := append(append([]string{"build", "-o", c.path}, c.Flags...), c.Pkg)
		build := exec.Command("go", args...)
		if c.Static {
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := build.CombinedOutput(); err != nil {
			c.err = fmt.Errorf("go build %s: %v\n%s", c.Pkg, err, out)
			return
		}
		for _, pkg := range c.Beside {
			if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, path.Base(pkg)), pkg).CombinedOutput(); err != nil {
				c.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.path
}

func prebuilt(dir, name string) (string, error) {
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s is set: %w", PrebuiltEnv, err)
	}
	return path, nil
}

// removeDeadBuilds removes the build dirs of name that test processes no
// longer running made: a test process has no end to remove its own at, and
// each leaves tens of megabytes. A dir names its process by pid; a pid that
// another process took since only keeps a dir a while longer.
func removeDeadBuilds(name string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), name+"-bin-*-*"))
	for _, dir := range dirs {
		pid, err := strconv.Atoi(strings.Split(strings.TrimPrefix(filepath.Base(dir), name+"-bin-"), "-")[0])
		if err == nil && pid > 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

// Shim is the embedded runtime's light per-pod shim, for tests that start the
// runtime in-process (proc.Config.ShimPath): the test binary could host it,
// but a race-enabled test binary started for every pod and container is slow.
var Shim = &Command{Pkg: "github.com/jetlet/jetlet/cmd/jetlet-shim", Name: "jetlet-shim"}
