package mountinfo

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/a\134b`: `/a\b`, `/plain`: "/plain", `/end\04`: `/end\04`} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

// A bind of a directory of the same file system is a mount point (a
// comparison of devices would say no), and is listed under its parents;
// a path with a space in it is found.
func TestABindIsAMountPoint(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a bind mount needs root")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	src, target := filepath.Join(dir, "src"), filepath.Join(dir, "a target")
	for _, d := range []string{src, target} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := IsMountPoint(target); err != nil || got {
		t.Fatalf("IsMountPoint before the bind = %v, %v", got, err)
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
	if got, err := IsMountPoint(target); err != nil || !got {
		t.Errorf("IsMountPoint of a bind = %v, %v", got, err)
	}
	if got, err := IsMountPoint(src); err != nil || got {
		t.Errorf("IsMountPoint of the bind's source = %v, %v", got, err)
	}
	if got, err := Under(dir); err != nil || !slices.Equal(got, []string{target}) {
		t.Errorf("Under(%s) = %v, %v", dir, got, err)
	}
	for _, at := range []string{dir, target} {
		if got, err := FirstUnder(at); err != nil || got != target {
			t.Errorf("FirstUnder(%s) = %q, %v; want %s", at, got, err, target)
		}
	}
	if got, err := FirstUnder(src); err != nil || got != "" {
		t.Errorf("FirstUnder of the bind's source = %q, %v", got, err)
	}
	if got, err := FirstUnder(filepath.Join(dir, "missing")); err != nil || got != "" {
		t.Errorf("FirstUnder of nothing = %q, %v", got, err)
	}
	if got, err := IsMountPoint(filepath.Join(dir, "missing")); err != nil || got {
		t.Errorf("IsMountPoint of nothing = %v, %v", got, err)
	}
}

// A file can be a mount point too (a volume's subPath of a file): FirstUnder
// finds it deep in a tree, past the files that are not.
func TestFirstUnderFindsABoundFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a bind mount needs root")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(dir, "volumes", "v")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	src, target := filepath.Join(dir, "src"), filepath.Join(deep, "file")
	for _, f := range []string{src, target, filepath.Join(deep, "other")} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := FirstUnder(dir); err != nil || got != "" {
		t.Fatalf("FirstUnder before the bind = %q, %v", got, err)
	}
	if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
	if got, err := FirstUnder(dir); err != nil || got != target {
		t.Errorf("FirstUnder = %q, %v; want %s", got, err, target)
	}
}
