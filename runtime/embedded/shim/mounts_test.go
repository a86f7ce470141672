package shim

import (
	"os"
	"path/filepath"
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
