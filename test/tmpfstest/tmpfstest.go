// Package tmpfstest mounts small tmpfs file systems for tests that need a
// file system of their own (a split image file system, one that fills up).
package tmpfstest

import (
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// Mount mounts a tmpfs of size bytes (and inodes inodes, 0 for the kernel's
// default) at a new directory under t.TempDir(), unmounted when the test
// ends. It needs root.
func Mount(t testing.TB, size, inodes int64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := unix.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := "mode=755,size=" + strconv.FormatInt(size, 10)
	if inodes > 0 {
		opts += ",nr_inodes=" + strconv.FormatInt(inodes, 10)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		t.Fatalf("mount a tmpfs at %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}
