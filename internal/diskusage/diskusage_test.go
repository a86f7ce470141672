package diskusage

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jetlet/jetlet/test/pathswap"
)

// A pod swapping a directory of its emptyDir and a symlink to the node's
// root while its volumes are measured: the walk never goes through the
// symlink, so it counts at most the volume's own inodes (the directory's
// twice, seen under both names as it moves).
func TestDiskUsageDoesNotFollowASwappedSymlink(t *testing.T) {
	root := t.TempDir()
	d, l := filepath.Join(root, "d"), filepath.Join(root, "l")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := os.WriteFile(filepath.Join(d, fmt.Sprint(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/", l); err != nil {
		t.Fatal(err)
	}
	const most = 23 // root, d, l, d's ten files under each name
	pathswap.Start(t, d, l)
	for range 5000 {
		u, err := Measure(root)
		if err != nil {
			t.Fatal(err)
		}
		if u.Inodes > most {
			t.Fatalf("Measure counted %d inodes under a volume of %d: it walked through the symlink", u.Inodes, most)
		}
	}
}
