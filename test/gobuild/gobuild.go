// Package gobuild builds a Go command once per test process, for tests that
// run it as a real process; a Cached one once per machine.
package gobuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
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
	// Module is the directory of the Go module to build Pkg in, when it is
	// not this one: a module of its own keeps a command's dependencies out
	// of jetlet's go.mod (test/kube/controlplane).
	Module string
	// Cached keeps the binary of a Module in the machine's cache (CacheEnv)
	// under a key of the module's files and the Go version, for a command
	// whose cold build takes minutes; without a cache dir it is built per
	// test process like any other. Beside is not built for it.
	Cached bool

	once sync.Once
	path string
	err  error
}

// PrebuiltEnv names a directory of commands built beforehand, each named
// by its Name (Beside's next to it): where tests run without a Go toolchain
// (test/vm's guest), Path returns the one there and builds nothing.
const PrebuiltEnv = "JETLET_GOBUILD_DIR"

// CacheEnv names the directory where Cached commands are kept across test
// processes; unset, it is DefaultCache when that exists (CI's caches).
const (
	CacheEnv     = "JETLET_GOBUILD_CACHE"
	DefaultCache = "/var/cache/jetlet-ci"
)

// Path builds the command the first time it is asked for (go.mod's versions,
// nothing downloaded) and returns the binary's path.
func (c *Command) Path(t testing.TB) string {
	t.Helper()
	c.once.Do(func() {
		if dir := os.Getenv(PrebuiltEnv); dir != "" {
			c.path, c.err = prebuilt(dir, c.Name)
			return
		}
		if cache := cacheDir(); c.Cached && cache != "" {
			c.path, c.err = c.cached(cache)
			return
		}
		removeDeadBuilds(c.Name)
		dir, err := os.MkdirTemp("", fmt.Sprintf("%s-bin-%d-", c.Name, os.Getpid()))
		if err != nil {
			c.err = err
			return
		}
		c.path = filepath.Join(dir, c.Name)
		if c.err = c.build(c.path); c.err != nil {
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

func (c *Command) build(out string) error {
	args := append(append([]string{"build", "-o", out}, c.Flags...), c.Pkg)
	build := exec.Command("go", args...)
	build.Dir = c.Module
	if c.Static {
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", c.Pkg, err, out)
	}
	return nil
}

func cacheDir() string {
	if dir := os.Getenv(CacheEnv); dir != "" {
		return dir
	}
	if fi, err := os.Stat(DefaultCache); err == nil && fi.IsDir() {
		return DefaultCache
	}
	return ""
}

// cached returns the binary kept in cache for the module's files as they
// are, building it first when it is not there. Test processes building it
// at once each build their own and rename it into place.
func (c *Command) cached(cache string) (string, error) {
	key, err := c.key()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(cache, c.Name+"-"+key, c.Name)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	if err := c.build(tmp); err != nil {
		_ = os.Remove(tmp)
		return "", err
	}
	return bin, os.Rename(tmp, bin)
}

// key hashes what the binary is built from: the Go version, the build's
// settings, and every file of Module (go.sum pins the rest).
func (c *Command) key() (string, error) {
	if c.Module == "" {
		return "", fmt.Errorf("gobuild: %s is Cached without a Module", c.Name)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%q\x00%v\x00", runtime.Version(), c.Pkg, c.Flags, c.Static)
	err := filepath.WalkDir(c.Module, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.Module, p)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16], err
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
