package shim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolveIn(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"run", "usr/lib"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"var":     "/run/../usr", // absolute: inside root, not the host's
		"lib":     "usr/lib",     // relative
		"escape":  "../../../..", // never above root
		"loop":    "loop",
		"usr/up":  "..",
		"usr/abs": "/",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ path, want string }{
		{"/var/lib/x", "/usr/lib/x"},
		{"/lib/x", "/usr/lib/x"},
		{"/escape/etc", "/etc"},
		{"/usr/up/run", "/run"},
		{"/usr/abs/usr/up/../run/", "/run"},
		{"/no/such/path", "/no/such/path"},
		{"relative", "/relative"},
	} {
		got, err := resolveIn(root, tc.path)
		if err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		if want := filepath.Join(root, tc.want); got != want {
			t.Errorf("%s resolves to %s, want %s", tc.path, got, want)
		}
	}
	if _, err := resolveIn(root, "/loop/x"); err == nil {
		t.Error("a symbolic link loop resolved")
	}
}

func TestUnescapeMountPoint(t *testing.T) {
	for in, want := range map[string]string{
		`/mnt/a\040b`:  "/mnt/a b",
		`/mnt/tab\011`: "/mnt/tab\t",
		`/mnt/back\\`:  `/mnt/back\\`,
		`/plain`:       "/plain",
	} {
		if got := unescapeMountPoint(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// walk, open's way without openat2 and mountPoint's way to create, stays
// in the root: links resolve inside it, and it creates through none.
func TestWalkStaysInTheRoot(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr/lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"lib": "/usr/lib", "out": outside, "up": "../../.."} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := openContainerRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	dir := true
	for path, want := range map[string]string{
		"/lib/new/dir": "usr/lib/new/dir", // created, through the link inside the root
		"/out/x":       strings.TrimPrefix(outside, "/") + "/x",
		"/up/etc":      "etc",
	} {
		f, err := r.walk(path, followLinks, &dir)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		got, _ := os.Readlink(fdPath(f))
		f.Close()
		if got != filepath.Join(root, want) {
			t.Errorf("%s opened %s, want %s", path, got, filepath.Join(root, want))
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Error("walk created a directory out of the root")
	}
	if f, err := r.walk("/lib", noLinks, nil); err == nil {
		f.Close()
		t.Error("walk without links opened a link")
	}
}
