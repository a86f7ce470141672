package embedded

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/gobuild"
)

// Start makes Dir 0700, an existing one too: each pod's /dev/shm (a 1777
// tmpfs) and each container's files below it are closed to other users,
// whoever started the runtime.
func TestStartClosesItsDir(t *testing.T) {
	base, err := os.MkdirTemp("", "jpdir") // short: the socket lives here
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	existing := filepath.Join(base, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	bridge, cidr := cnitest.Bridge(t)
	for _, dir := range []string{filepath.Join(base, "new", "state"), existing} {
		rt, err := New(Config{Dir: dir, ShimPath: gobuild.Shim.Path(t), Logger: zerolog.New(zerolog.NewTestWriter(t)), PodBridge: bridge, PodCIDR: cidr})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Start(context.Background(), filepath.Join(base, "cri.sock")); err != nil {
			t.Fatal(err)
		}
		rt.Stop()
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != os.ModeDir|0o700 {
			t.Errorf("%s: %v after Start, want drwx------", dir, fi.Mode())
		}
	}
}
