package testimages

import (
	"archive/tar"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

func TestBusyboxHoldsWhatItsDocSays(t *testing.T) {
	img := must(t, Busybox)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	files, order := layerFiles(t, img, 0)
	links := slices.IndexFunc(order, func(p string) bool { return files[p].hdr.Typeflag == tar.TypeLink })
	if links < 0 || !slices.IsSorted(order[:links]) || !slices.IsSorted(order[links:]) ||
		slices.ContainsFunc(order[links:], func(p string) bool { return files[p].hdr.Typeflag != tar.TypeLink }) {
		t.Errorf("entries not sorted, hard links last: %v", order)
	}
	program, err := os.ReadFile(BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path     string
		typ      byte
		mode     int64
		uid      int
		content  string
		linkname string
	}{
		{"bin/busybox", tar.TypeReg, 0o755, 0, string(program), ""},
		{"bin/sh", tar.TypeLink, 0o755, 0, "", "bin/busybox"},
		{"bin/ls", tar.TypeLink, 0o755, 0, "", "bin/busybox"},
		{"usr/sbin/httpd", tar.TypeLink, 0o755, 0, "", "bin/busybox"},
		{"etc/passwd", tar.TypeReg, 0o644, 0, BusyboxPasswd, ""},
		{"etc/group", tar.TypeReg, 0o644, 0, BusyboxGroup, ""},
		{"var/www/index.html", tar.TypeReg, 0o644, 0, IndexHTML, ""},
		{"tmp", tar.TypeDir, 0o1777, 0, "", ""},
		{"root", tar.TypeDir, 0o700, 0, "", ""},
		{"home/jetlet", tar.TypeDir, 0o755, 1000, "", ""},
		{"proc", tar.TypeDir, 0o555, 0, "", ""},
		{"var/www", tar.TypeDir, 0o755, 0, "", ""},
	} {
		f, ok := files[c.path]
		if !ok {
			t.Errorf("%s: missing", c.path)
			continue
		}
		h := f.hdr
		if h.Typeflag != c.typ || h.Mode != c.mode || h.Uid != c.uid || h.Gid != c.uid || f.content != c.content || h.Linkname != c.linkname {
			t.Errorf("%s: type %q mode %o owner %d:%d link %q (%d bytes), want type %q mode %o owner %d link %q (%d bytes)",
				c.path, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Linkname, len(f.content), c.typ, c.mode, c.uid, c.linkname, len(c.content))
		}
	}
	out, err := exec.Command(BusyboxPath, "--list-full").Output()
	if err != nil {
		t.Fatal(err)
	}
	applets := strings.Fields(string(out))
	if len(applets) < 100 {
		t.Fatalf("busybox lists %d applets", len(applets))
	}
	for _, p := range applets {
		if f, ok := files[p]; !ok || (p != "bin/busybox" && (f.hdr.Typeflag != tar.TypeLink || f.hdr.Linkname != "bin/busybox")) {
			t.Errorf("applet %s: not a hard link to /bin/busybox", p)
		}
	}
	for p, f := range files {
		if !f.hdr.ModTime.Equal(Epoch) {
			t.Errorf("%s: mtime %v", p, f.hdr.ModTime)
		}
	}

	cf := config(t, img)
	if cf.Architecture != runtime.GOARCH || cf.OS != "linux" || !cf.Created.Equal(Epoch) {
		t.Errorf("platform %s/%s created %v", cf.OS, cf.Architecture, cf.Created)
	}
	want := v1.Config{Env: []string{Path}, Cmd: []string{"sh"}}
	if !configEqual(cf.Config, want) {
		t.Errorf("config %+v, want %+v", cf.Config, want)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("media type %s", mt)
	}
}

func TestHttpdAndNonRootConfigs(t *testing.T) {
	base := digestOfLayers(t, must(t, Busybox))
	for _, c := range []struct {
		name string
		img  func() (v1.Image, error)
		want v1.Config
	}{
		{"Httpd", Httpd, v1.Config{
			Env: []string{Path}, Entrypoint: []string{"httpd", "-f", "-p", "80", "-h", "/var/www"},
			ExposedPorts: map[string]struct{}{"80/tcp": {}},
		}},
		{"NonRoot", NonRoot, v1.Config{Env: []string{Path}, Cmd: []string{"sh"}, User: "jetlet", WorkingDir: "/home/jetlet"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := must(t, c.img)
			if got := config(t, img).Config; !configEqual(got, c.want) {
				t.Errorf("config %+v, want %+v", got, c.want)
			}
			if got := digestOfLayers(t, img); !slices.Equal(got, base) {
				t.Errorf("layers %v, want Busybox's %v", got, base)
			}
		})
	}
}

func TestTheSameBusyboxMakesTheSameDigest(t *testing.T) {
	l1, err := newBusyboxLayer()
	if err != nil {
		t.Fatal(err)
	}
	l2, err := newBusyboxLayer()
	if err != nil {
		t.Fatal(err)
	}
	cfg := v1.Config{Env: []string{Path}, Cmd: []string{"sh"}}
	i1, err := build(cfg, addendum(l1, "x"))
	if err != nil {
		t.Fatal(err)
	}
	i2, err := build(cfg, addendum(l2, "x"))
	if err != nil {
		t.Fatal(err)
	}
	if d1, d2 := digest(t, i1), digest(t, i2); d1 != d2 {
		t.Errorf("two builds: %s and %s", d1, d2)
	}
}

// TestHttpdServesIndexHTML runs Httpd's entrypoint (busybox httpd in a
// chroot of the image, on another port than 80) and gets /.
func TestHttpdServesIndexHTML(t *testing.T) {
	img := must(t, Httpd)
	root := unpack(t, img)
	port := freePort(t)
	args := append([]string{"chroot", root}, config(t, img).Config.Entrypoint...)
	args[slices.Index(args, "80")] = port
	stop := start(t, []string{Path}, args...)
	defer stop()
	if got := httpGet(t, "http://127.0.0.1:"+port+"/"); got != IndexHTML {
		t.Errorf("GET / = %q, want %q", got, IndexHTML)
	}
}

// TestNonRootRunsAsJetlet resolves the image's user as a runtime does
// (busybox id, in a chroot of the image, as 1000).
func TestNonRootRunsAsJetlet(t *testing.T) {
	root := unpack(t, must(t, NonRoot))
	out := run(t, []string{Path}, "chroot", "--userspec=1000:1000", root, "sh", "-c", "id -un; id -Gn jetlet")
	if want := "jetlet\njetlet users\n"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func configEqual(a, b v1.Config) bool {
	return slices.Equal(a.Env, b.Env) && slices.Equal(a.Cmd, b.Cmd) && slices.Equal(a.Entrypoint, b.Entrypoint) &&
		a.User == b.User && a.WorkingDir == b.WorkingDir && len(a.ExposedPorts) == len(b.ExposedPorts) &&
		func() bool {
			for p := range a.ExposedPorts {
				if _, ok := b.ExposedPorts[p]; !ok {
					return false
				}
			}
			return true
		}()
}

func digestOfLayers(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	var ds []v1.Hash
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	return ds
}

// WithProgram is Busybox's layer and one more with /bin and the program.
func TestWithProgramAddsALayerOverBusybox(t *testing.T) {
	img, err := WithProgram("tool", []byte("#!/bin/sh\necho tool\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, base := digestOfLayers(t, img), digestOfLayers(t, must(t, Busybox)); len(got) != 2 || got[0] != base[0] {
		t.Fatalf("layers %v, want Busybox's %v and one more", got, base)
	}
	files, order := layerFiles(t, img, 1)
	if f := files["bin/tool"]; !slices.Equal(order, []string{"bin", "bin/tool"}) || f.hdr.Mode != 0o755 || f.content != "#!/bin/sh\necho tool\n" {
		t.Fatalf("second layer %v, bin/tool %+v", order, f.hdr)
	}
}
