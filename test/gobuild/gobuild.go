// Package gobuild builds a Go command once per test process, for tests that
// run it as a real process.
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Command is a Go command built on first use.
type Command struct {
	Pkg   string   // import path of its main package
	Name  string   // file name of the binary
	Flags []string // more `go build` flags

	once sync.Once
	path string
	err  error
}

// Path builds the command the first time it is asked for (go.mod's versions,
// nothing downloaded) and returns the binary's path.
func (c *Command) Path(t testing.TB) string {
	t.Helper()
	c.once.Do(func() {
		dir, err := os.MkdirTemp("", c.Name+"-bin")
		if err != nil {
			c.err = err
			return
		}
		c.path = filepath.Join(dir, c.Name)
		args := append(append([]string{"build", "-o", c.path}, c.Flags...), c.Pkg)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			c.err = fmt.Errorf("go build %s: %v\n%s", c.Pkg, err, out)
		}
	})
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.path
}
