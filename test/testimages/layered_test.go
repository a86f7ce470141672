package testimages

import (
	"archive/tar"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

func TestLayeredSecondLayerHoldsWhatItsDocSays(t *testing.T) {
	img := must(t, Layered)
	layers := digestOfLayers(t, img)
	if base := digestOfLayers(t, must(t, Busybox)); len(layers) != 2 || layers[0] != base[0] {
		t.Fatalf("layers %v, want Busybox's %v and one more", layers, base)
	}
	files, order := layerFiles(t, img, 1)
	want := map[string]struct {
		typ      byte
		mode     int64
		uid      int
		content  string
		linkname string
	}{
		"var":                       {tar.TypeDir, 0o755, 0, "", ""},
		"var/www":                   {tar.TypeDir, 0o755, 0, "", ""},
		"var/www/.wh.index.html":    {tar.TypeReg, 0o644, 0, "", ""},
		"usr":                       {tar.TypeDir, 0o755, 0, "", ""},
		"usr/sbin":                  {tar.TypeDir, 0o755, 0, "", ""},
		"usr/sbin/.wh..wh..opq":     {tar.TypeReg, 0o644, 0, "", ""},
		"usr/sbin/README":           {tar.TypeReg, 0o644, 0, LayeredReadme, ""},
		"opt":                       {tar.TypeDir, 0o755, 0, "", ""},
		"opt/layered":               {tar.TypeDir, 0o755, 0, "", ""},
		"opt/layered/hello.txt":     {tar.TypeReg, 0o644, 0, LayeredHello, ""},
		"opt/layered/hardlink.txt":  {tar.TypeLink, 0o644, 0, "", "opt/layered/hello.txt"},
		"opt/layered/symlink.txt":   {tar.TypeSymlink, 0o777, 0, "", "hello.txt"},
		"opt/layered/owned.txt":     {tar.TypeReg, 0o640, 1000, LayeredOwned, ""},
		"opt/layered/entrypoint.sh": {tar.TypeReg, 0o755, 0, LayeredEntrypoint, ""},
	}
	if slices.Index(order, "opt/layered/hardlink.txt") < slices.Index(order, "opt/layered/hello.txt") {
		t.Errorf("the hard link comes before its file: %v", order)
	}
	if len(files) != len(want) {
		t.Errorf("second layer holds %v, want the %d its doc lists", order, len(want))
	}
	for p, w := range want {
		f, ok := files[p]
		if !ok {
			t.Errorf("%s: missing", p)
			continue
		}
		h := f.hdr
		if h.Typeflag != w.typ || h.Mode != w.mode || h.Uid != w.uid || h.Gid != w.uid || f.content != w.content || h.Linkname != w.linkname {
			t.Errorf("%s: type %q mode %o owner %d:%d link %q content %q", p, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Linkname, f.content)
		}
	}

	fs := flattened(t, img)
	for _, gone := range []string{"var/www/index.html", "usr/sbin/httpd", "usr/sbin/chroot"} {
		if _, ok := fs[gone]; ok {
			t.Errorf("%s: still there when flattened", gone)
		}
	}
	var sbin []string
	for p := range fs {
		if strings.HasPrefix(p, "usr/sbin/") {
			sbin = append(sbin, p)
		}
	}
	if !slices.Equal(sbin, []string{"usr/sbin/README"}) {
		t.Errorf("/usr/sbin holds %v, want README only", sbin)
	}
	for _, kept := range []string{"bin/sh", "bin/busybox", "etc/passwd", "var/www"} {
		if _, ok := fs[kept]; !ok {
			t.Errorf("%s: gone when flattened", kept)
		}
	}

	want2 := v1.Config{
		Entrypoint: []string{"/opt/layered/entrypoint.sh"}, Cmd: []string{"cat", "hello.txt"},
		Env: []string{Path, "LAYERED_GREETING=hello from layered"}, WorkingDir: "/opt/layered",
	}
	if got := config(t, img).Config; !configEqual(got, want2) {
		t.Errorf("config %+v, want %+v", got, want2)
	}
}

// TestLayeredRunsAsItsDocSays runs the image's entrypoint and command in a
// chroot of its file system, in its working dir with its env.
func TestLayeredRunsAsItsDocSays(t *testing.T) {
	img := must(t, Layered)
	root := unpack(t, img)
	hello, err := os.Stat(filepath.Join(root, "opt/layered/hello.txt"))
	if err != nil {
		t.Fatal(err)
	}
	hard, err := os.Stat(filepath.Join(root, "opt/layered/hardlink.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(hello, hard) || hello.Sys().(*syscall.Stat_t).Nlink != 2 {
		t.Errorf("hardlink.txt is not hello.txt's inode")
	}
	cfg := config(t, img).Config
	args := append(append([]string{"chroot", root, "sh", "-c", `cd "$0" && exec "$@"`, cfg.WorkingDir}, cfg.Entrypoint...), cfg.Cmd...)
	if got := run(t, cfg.Env, args...); got != LayeredOutput {
		t.Errorf("output %q, want %q", got, LayeredOutput)
	}
}
