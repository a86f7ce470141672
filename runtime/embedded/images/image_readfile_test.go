package images

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
)

// TestReadFileStaysInTheImage: symlinks resolve inside the image root,
// whatever they point at, and the merged view's whiteouts and opaque
// directories hold.
func TestReadFileStaysInTheImage(t *testing.T) {
	reg := newTestRegistry(t, nil)
	img := testImage(t, "readfile",
		layer(t,
			file("real/passwd", "image-passwd", 0o644),
			file("usr/lib/os-release", "os", 0o644),
			file("etc/group", "lower-group", 0o644),
			file("d/f", "lower-f", 0o644),
			file("gone", "gone", 0o644),
		),
		layer(t,
			symlink("etc/passwd", "/../../../../real/passwd"),
			symlink("etc/group", "../../../../../etc/hostname"),
			symlink("etc/shadow", "/etc/../../etc/../real/./passwd"),
			symlink("lib", "usr/lib"),
			symlink("dirlink", "/d"),
			symlink("loop1", "loop2"),
			symlink("loop2", "loop1"),
			dir("d", 0o755),
			file("d/.wh..wh..opq", "", 0o644),
			file("d/g", "upper-g", 0o644),
			whiteout("gone"),
		),
	)
	ref := reg.pushImage(t, "readfile:1", img)
	s := openStore(t, Options{})
	im, err := s.Pull(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"/etc/passwd":        "image-passwd",
		"etc/passwd":         "image-passwd",
		"/etc/shadow":        "image-passwd",
		"/lib/os-release":    "os",
		"/dirlink/g":         "upper-g",
		"/d/../real/passwd":  "image-passwd",
		"/../../real/passwd": "image-passwd",
	} {
		b, err := s.ReadFile(im, name)
		if err != nil || string(b) != want {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", name, b, err, want)
		}
	}
	for _, name := range []string{"/etc/group", "/d/f", "/dirlink/f", "/gone", "/nothing", "/real/passwd/x"} {
		if b, err := s.ReadFile(im, name); err == nil || (!errors.Is(err, fs.ErrNotExist) && !strings.Contains(err.Error(), "not a directory")) {
			t.Errorf("ReadFile(%s) = %q, %v; want not found", name, b, err)
		}
	}
	for _, name := range []string{"/loop1", "/d", "/"} {
		if b, err := s.ReadFile(im, name); err == nil {
			t.Errorf("ReadFile(%s) = %q, want an error", name, b)
		} else if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), im.ID) {
			t.Errorf("error %q does not name the file and the image", err)
		}
	}
}
