package images

import (
	"archive/tar"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// treeLayers are three layers exercising what unpacking converts: a
// whiteout of a lower file and of a lower directory, an opaque directory, a
// directory whited out and made again in one layer, hard links, symlinks,
// a setuid file, sticky and setgid directories, non-root owners, an xattr,
// a fifo, a device node (skipped), an absolute name.
func treeLayers() [][]tentry {
	return [][]tentry{
		{
			dir("etc", 0o755),
			file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n", 0o644),
			file("etc/group", "root:x:0:\n", 0o644),
			file("etc/removed", "removed", 0o644),
			dir("opq", 0o755),
			file("opq/old", "old", 0o644),
			dir("opq/sub", 0o755),
			file("opq/sub/deep", "deep", 0o644),
			dir("keep", 0o755),
			file("keep/lower", "lower", 0o644),
			dir("gone", 0o755),
			file("gone/inner", "inner", 0o644),
			dir("redo", 0o755),
			file("redo/old", "old", 0o644),
			dir("bin", 0o755),
			file("bin/sh", "#!sh", 0o755),
		},
		{
			whiteout("etc/removed"),
			dir("opq", 0o700),
			file("opq/.wh..wh..opq", "", 0o644),
			file("opq/new", "new", 0o600),
			whiteout("gone"),
			file("bin/su", "su", 0o4755),
			hardlink("bin/su2", "bin/su"),
			symlink("bin/link", "sh"),
			symlink("etc/localtime", "/usr/share/zoneinfo/UTC"),
			{name: "home/app/", typ: tar.TypeDir, mode: 0o750, uid: 1000, gid: 1000},
			{name: "home/app/notes", typ: tar.TypeReg, body: "n", mode: 0o640, uid: 1000, gid: 1000},
			{name: "xattr-file", typ: tar.TypeReg, body: "x", mode: 0o644, xattrs: map[string]string{"user.test": "hello"}},
			{name: "run/fifo", typ: tar.TypeFifo, mode: 0o600},
			{name: "dev/null", typ: tar.TypeChar, mode: 0o666},
			dir("tmp", 0o1777),
			dir("shared", 0o2775),
		},
		{
			file("etc/passwd", "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n", 0o644),
			file("keep/upper", "upper", 0o644),
			file("/abs/file", "abs", 0o644),
			whiteout("redo"),
			dir("redo", 0o755),
			file("redo/new", "new", 0o644),
		},
	}
}

// wantTree is the merged tree of treeLayers.
var wantTree = []string{
	`. dir 0755 0:0`,
	`abs dir 0755 0:0`,
	`abs/file file 0644 0:0 "abs"`,
	`bin dir 0755 0:0`,
	`bin/link symlink -> sh`,
	`bin/sh file 0755 0:0 "#!sh"`,
	`bin/su file 4755 0:0 "su"`,
	`bin/su2 file 4755 0:0 "su"`,
	`etc dir 0755 0:0`,
	`etc/group file 0644 0:0 "root:x:0:\n"`,
	`etc/localtime symlink -> /usr/share/zoneinfo/UTC`,
	`etc/passwd file 0644 0:0 "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000::/home/app:/bin/sh\n"`,
	`home dir 0755 0:0`,
	`home/app dir 0750 1000:1000`,
	`home/app/notes file 0640 1000:1000 "n"`,
	`keep dir 0755 0:0`,
	`keep/lower file 0644 0:0 "lower"`,
	`keep/upper file 0644 0:0 "upper"`,
	`opq dir 0700 0:0`,
	`opq/new file 0600 0:0 "new"`,
	`redo dir 0755 0:0`,
	`redo/new file 0644 0:0 "new"`,
	`run dir 0755 0:0`,
	`run/fifo fifo 0600 0:0`,
	`shared dir 2775 0:0`,
	`tmp dir 1777 0:0`,
	`xattr-file file 0644 0:0 "x"`,
}

func TestPulledLayersMergeWithOverlayfsIntoTheImageTree(t *testing.T) {
	reg := newTestRegistry(t, nil)
	layers := treeLayers()
	img := testImage(t, "tree", layer(t, layers[0]...), layer(t, layers[1]...), layer(t, layers[2]...))
	ref := reg.pushImage(t, "tree:1", img)
	s := openStore(t, Options{})

	im, err := s.Pull(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs := s.LayerDirs(im)
	if len(dirs) != 3 {
		t.Fatalf("LayerDirs = %v, want 3", dirs)
	}
	for _, d := range dirs {
		if !filepath.IsAbs(d) || filepath.Dir(d) != s.layersDir {
			t.Errorf("layer dir %s is not an absolute path in %s", d, s.layersDir)
		}
	}
	if want := s.layerDir(im.Layers[2]); dirs[0] != want {
		t.Errorf("LayerDirs[0] = %s, want the top layer %s", dirs[0], want)
	}

	// In the layers themselves: overlayfs's whiteout and opaque formats.
	var st unix.Stat_t
	for _, p := range []string{filepath.Join(dirs[1], "etc/removed"), filepath.Join(dirs[1], "gone")} {
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Errorf("%s: mode %o rdev %d, want a 0/0 character device", p, st.Mode, st.Rdev)
		}
	}
	for _, p := range []string{filepath.Join(dirs[1], "opq"), filepath.Join(dirs[0], "redo")} {
		if !isOpaque(p) {
			t.Errorf("%s has no trusted.overlay.opaque=y", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(dirs[1], "dev")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a device node was unpacked: %v", err)
	}
	su, err := os.Stat(filepath.Join(dirs[1], "bin/su"))
	if err != nil {
		t.Fatal(err)
	}
	su2, err := os.Stat(filepath.Join(dirs[1], "bin/su2"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(su, su2) {
		t.Error("bin/su2 is not a hard link of bin/su")
	}
	if got := su.ModTime(); !got.Equal(layerTime) {
		t.Errorf("bin/su mtime %v, want %v", got, layerTime)
	}
	opq, err := os.Stat(filepath.Join(dirs[1], "opq"))
	if err != nil {
		t.Fatal(err)
	}
	if got := opq.ModTime(); !got.Equal(layerTime) {
		t.Errorf("opq mtime %v, want %v (directory times are set after their entries)", got, layerTime)
	}

	// Merged by the kernel.
	mnt := mountOverlay(t, dirs)
	got := describeTree(t, mnt)
	if !slices.Equal(got, wantTree) {
		t.Errorf("merged tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantTree, "\n"))
	}
	buf := make([]byte, 16)
	n, err := unix.Lgetxattr(filepath.Join(mnt, "xattr-file"), "user.test", buf)
	if err != nil || string(buf[:n]) != "hello" {
		t.Errorf("xattr user.test = %q, %v; want hello", buf[:n], err)
	}

	// ReadFile agrees with the kernel on every file, symlinks followed.
	for _, line := range got {
		p, rest, _ := strings.Cut(line, " ")
		// Symlinks are read through the mount only when relative: the
		// kernel follows an absolute one out to the host, ReadFile not.
		if !strings.HasPrefix(rest, "file ") && !strings.HasPrefix(rest, "symlink -> sh") {
			continue
		}
		want, err := os.ReadFile(filepath.Join(mnt, p))
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.ReadFile(im, "/"+p)
		if err != nil || string(b) != string(want) {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", p, b, err, want)
		}
	}
	for _, p := range []string{"/etc/removed", "/opq/old", "/opq/sub/deep", "/gone/inner", "/redo/old", "/dev/null", "/etc/localtime"} {
		if _, err := s.ReadFile(im, p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadFile(%s) = %v, want not found", p, err)
		}
		if _, err := os.Lstat(filepath.Join(mnt, p)); err == nil && p != "/etc/localtime" {
			t.Errorf("%s is in the merged tree", p)
		}
	}
}

// TestHostileLayersAreRefused pulls layers that try to write outside the
// layer directory: each pull fails, nothing is written outside, and the
// store keeps no trace of the layer.
func TestHostileLayersAreRefused(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := strings.Repeat("../", 32)
	cases := []struct {
		name    string
		entries []tentry
	}{
		{"dot-dot path", []tentry{file(up+outside[1:]+"/pwned", "x", 0o644)}},
		{"dot-dot inside the path", []tentry{file("a/../../"+up+outside[1:]+"/pwned", "x", 0o644)}},
		{"absolute symlink parent", []tentry{symlink("a", outside), file("a/pwned", "x", 0o644)}},
		{"relative symlink parent", []tentry{dir("d", 0o755), symlink("d/b", up+outside[1:]), file("d/b/pwned", "x", 0o644)}},
		{"symlink parent of a whiteout", []tentry{symlink("a", outside), whiteout("a/secret")}},
		{"symlink parent of an opaque marker", []tentry{symlink("a", outside), file("a/.wh..wh..opq", "", 0o644)}},
		{"symlink parent of a directory", []tentry{symlink("a", outside), dir("a/pwned", 0o755)}},
		{"dot-dot hard link", []tentry{hardlink("h", up+outside[1:]+"/secret")}},
		{"absolute hard link to a host file", []tentry{hardlink("h", secret)}},
		{"hard link through a symlink", []tentry{symlink("a", outside), hardlink("h", "a/secret")}},
	}
	reg := newTestRegistry(t, nil)
	s := openStore(t, Options{})
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			img := testImage(t, c.name, layer(t, c.entries...))
			ref := reg.pushImage(t, "hostile:"+string(rune('a'+i)), img)
			_, err := s.Pull(t.Context(), ref, nil)
			if err == nil {
				t.Fatal("the pull succeeded")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), ref) {
				t.Errorf("error %q does not name the reference", err)
			}
			entries, err := os.ReadDir(outside)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Errorf("%s holds %d entries, want only the secret", outside, len(entries))
			}
			var st unix.Stat_t
			if err := unix.Stat(secret, &st); err != nil || st.Nlink != 1 {
				t.Errorf("secret: %v, %d links", err, st.Nlink)
			}
			if b, _ := os.ReadFile(secret); string(b) != "host" {
				t.Errorf("secret now holds %q", b)
			}
			if left := layerEntries(t, s); len(left) != 0 {
				t.Errorf("layers/ holds %v after a refused layer", left)
			}
			if s.Lookup(ref) != nil {
				t.Error("the image was recorded")
			}
		})
	}
}

// TestSymlinksAreStoredVerbatimAndNeverFollowed: an entry replacing a
// symlink replaces the link, not what it points at.
func TestSymlinksAreStoredVerbatimAndNeverFollowed(t *testing.T) {
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := newTestRegistry(t, nil)
	img := testImage(t, "links", layer(t,
		symlink("c", victim),
		file("c", "layer", 0o644),
		symlink("d", outside),
		dir("d", 0o755),
		symlink("e", "../../../../.."+outside),
	))
	ref := reg.pushImage(t, "links:1", img)
	s := openStore(t, Options{})
	im, err := s.Pull(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	top := s.LayerDirs(im)[0]
	if b, _ := os.ReadFile(victim); string(b) != "host" {
		t.Errorf("the victim holds %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(top, "c")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("c: %v, %v; want a regular file", fi, err)
	}
	if fi, err := os.Lstat(filepath.Join(top, "d")); err != nil || !fi.IsDir() {
		t.Errorf("d: %v, %v; want a directory", fi, err)
	}
	if target, err := os.Readlink(filepath.Join(top, "e")); err != nil || target != "../../../../.."+outside {
		t.Errorf("e -> %q, %v; want the target verbatim", target, err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("%s holds %d entries", outside, len(entries))
	}
}

func TestEntryPath(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a/b", "a/b"},
		{"./a/b/", "a/b"},
		{"/etc/passwd", "etc/passwd"},
		{"a/../b", "b"},
		{"./", "."},
		{"/", "."},
		{"..", ""},
		{"../a", ""},
		{"a/../../b", ""},
		{"/../a", ""},
	} {
		got, err := entryPath(c.in)
		if c.want == "" {
			if !errors.Is(err, errEscape) {
				t.Errorf("entryPath(%q) = %q, %v; want an escape refused", c.in, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("entryPath(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// TestALayerTwiceInAnImageMountsOnce: overlayfs refuses a lowerdir given
// twice, so LayerDirs lists it once, where it is topmost, and the merged
// tree is the image's.
func TestALayerTwiceInAnImageMountsOnce(t *testing.T) {
	reg := newTestRegistry(t, nil)
	a := layer(t, file("a", "a", 0o644))
	b := layer(t, whiteout("a"), file("b", "b", 0o644))
	ref := reg.pushImage(t, "twice:1", testImage(t, "twice", a, b, a))
	s := openStore(t, Options{})
	im, err := s.Pull(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Layers) != 3 {
		t.Fatalf("Layers = %v, want 3", im.Layers)
	}
	dirs := s.LayerDirs(im)
	if want := []string{s.layerDir(im.Layers[2]), s.layerDir(im.Layers[1])}; !slices.Equal(dirs, want) {
		t.Fatalf("LayerDirs = %v, want %v", dirs, want)
	}
	want := []string{`. dir 0755 0:0`, `a file 0644 0:0 "a"`, `b file 0644 0:0 "b"`}
	if got := describeTree(t, mountOverlay(t, dirs)); !slices.Equal(got, want) {
		t.Errorf("merged tree %q, want %q", got, want)
	}
	if b, err := s.ReadFile(im, "/a"); err != nil || string(b) != "a" {
		t.Errorf("ReadFile(/a) = %q, %v", b, err)
	}
}
