package testimages

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path"
	"runtime"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BusyboxPath is the host's busybox-static, the one program of every image.
const BusyboxPath = "/bin/busybox"

// Path is the PATH of every image's config.
const Path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// IndexHTML is /var/www/index.html of Busybox (what Httpd serves at /).
const IndexHTML = "<html><body><h1>jetlet testimages</h1></body></html>\n"

// BusyboxPasswd is /etc/passwd of Busybox.
const BusyboxPasswd = `root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/bin/false
jetlet:x:1000:1000:jetlet:/home/jetlet:/bin/sh
nobody:x:65534:65534:nobody:/home:/bin/false
`

// BusyboxGroup is /etc/group of Busybox: jetlet (1000) is also in users (100).
const BusyboxGroup = `root:x:0:
daemon:x:1:
users:x:100:jetlet
jetlet:x:1000:
nogroup:x:65534:
`

// Busybox is one layer made of the host's busybox-static (BusyboxPath;
// Debian's package busybox-static) and a few files, in an OCI image for
// this machine's architecture. The layer holds, every file owned by root
// unless said, every time Epoch:
//
//	/bin/busybox                  the host's, 0755
//	<applet paths>                a hard link to /bin/busybox for each path
//	                              `busybox --list-full` prints (/bin/sh,
//	                              /bin/ls, /usr/sbin/httpd, /linuxrc, ...),
//	                              as in docker's busybox image: masking one
//	                              (a bind mount over /bin/ls) leaves the
//	                              others, where over a symlink it would mask
//	                              /bin/busybox itself
//	/etc/passwd, /etc/group       BusyboxPasswd and BusyboxGroup, 0644: root
//	                              (0), daemon (1), jetlet (1000:1000, also in
//	                              users, 100), nobody (65534, group nogroup)
//	/var/www/index.html           IndexHTML, 0644
//	/tmp                          1777
//	/root                         0700
//	/home/jetlet                  0755, owned by 1000:1000
//	/dev, /home, /var, /var/www   0755; /proc and /sys 0555; /bin, /sbin,
//	/usr, /usr/bin, /usr/sbin     0755
//
// Its config: Env [Path], Cmd ["sh"], no entrypoint, user or working dir.
// The same busybox makes the same digest. The image is built once per
// process; it fails when BusyboxPath is missing or is not statically linked.
func Busybox() (v1.Image, error) { return busybox() }

// Httpd is Busybox serving /var/www on port 80 with busybox's httpd: its
// config's Entrypoint is ["httpd", "-f", "-p", "80", "-h", "/var/www"], Cmd
// none, ExposedPorts 80/tcp. GET / answers IndexHTML.
func Httpd() (v1.Image, error) { return httpd() }

// NonRoot is Busybox with User "jetlet" (1000:1000 in its /etc/passwd: a
// runtime resolves the name) and WorkingDir /home/jetlet.
func NonRoot() (v1.Image, error) { return nonRoot() }

// Must returns the image fn builds, or fails t. For instance
// testimages.Must(t, testimages.Busybox).
func Must(t testing.TB, fn func() (v1.Image, error)) v1.Image {
	t.Helper()
	img, err := fn()
	if err != nil {
		t.Fatalf("testimages: %v", err)
	}
	return img
}

var (
	busyboxLayer = sync.OnceValues(newBusyboxLayer)
	busybox      = sync.OnceValues(func() (v1.Image, error) {
		l, err := busyboxLayer()
		if err != nil {
			return nil, err
		}
		return build(v1.Config{Env: []string{Path}, Cmd: []string{"sh"}},
			addendum(l, "busybox-static: /bin/busybox, its applets as hard links, /etc/passwd, /etc/group"))
	})
	httpd = sync.OnceValues(func() (v1.Image, error) {
		return derive(busybox, func(c *v1.Config) {
			c.Entrypoint = []string{"httpd", "-f", "-p", "80", "-h", "/var/www"}
			c.Cmd = nil
			c.ExposedPorts = map[string]struct{}{"80/tcp": {}}
		})
	})
	nonRoot = sync.OnceValues(func() (v1.Image, error) {
		return derive(busybox, func(c *v1.Config) {
			c.User = "jetlet"
			c.WorkingDir = "/home/jetlet"
		})
	})
)

// newBusyboxLayer builds Busybox's one layer.
func newBusyboxLayer() (v1.Layer, error) {
	program, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, fmt.Errorf("busybox-static (apt-get install busybox-static): %w", err)
	}
	if err := checkStatic(program); err != nil {
		return nil, err
	}
	out, err := exec.Command(BusyboxPath, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", BusyboxPath, err)
	}
	entries := []entry{
		dir("bin", 0o755), dir("dev", 0o755), dir("etc", 0o755), dir("home", 0o755),
		dir("home/jetlet", 0o755).owned(1000, 1000), dir("proc", 0o555),
		dir("root", 0o700), dir("sbin", 0o755), dir("sys", 0o555), dir("tmp", 0o1777),
		dir("usr", 0o755), dir("usr/bin", 0o755), dir("usr/sbin", 0o755),
		dir("var", 0o755), dir("var/www", 0o755),
		{Path: "bin/busybox", Type: tar.TypeReg, Mode: 0o755, Content: program},
		file("etc/passwd", 0o644, BusyboxPasswd),
		file("etc/group", 0o644, BusyboxGroup),
		file("var/www/index.html", 0o644, IndexHTML),
	}
	dirs := map[string]bool{}
	for _, e := range entries {
		dirs[e.Path] = true
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "bin/busybox" {
			continue
		}
		if dirs[p] {
			return nil, fmt.Errorf("%s --list-full lists %q twice", BusyboxPath, p)
		}
		for d := path.Dir(p); d != "." && !dirs[d]; d = path.Dir(d) {
			entries = append(entries, dir(d, 0o755))
			dirs[d] = true
		}
		entries = append(entries, hardlink(p, "bin/busybox"))
		dirs[p] = true
	}
	return newLayer(entries)
}

// checkStatic refuses a program that needs a dynamic loader: in an image
// with nothing else, it could not start.
func checkStatic(program []byte) error {
	f, err := elf.NewFile(bytes.NewReader(program))
	if err != nil {
		return fmt.Errorf("%s: %w", BusyboxPath, err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: the images need busybox-static", BusyboxPath)
		}
	}
	return nil
}

// addendum is l with its history line.
func addendum(l v1.Layer, createdBy string) mutate.Addendum {
	return mutate.Addendum{
		Layer:     l,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: Epoch}, CreatedBy: createdBy, Comment: "jetlet test/testimages"},
	}
}

// build is an OCI image for linux/GOARCH of the layers, in order, with cfg.
func build(cfg v1.Config, layers ...mutate.Addendum) (v1.Image, error) {
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = runtime.GOARCH
	cf.OS = "linux"
	cf.Created = v1.Time{Time: Epoch}
	cf.Config = cfg
	return mutate.ConfigFile(img, cf)
}

// derive is the image base builds with its config changed by edit and
// layers added on top.
func derive(base func() (v1.Image, error), edit func(*v1.Config), layers ...mutate.Addendum) (v1.Image, error) {
	img, err := base()
	if err != nil {
		return nil, err
	}
	if len(layers) > 0 {
		if img, err = mutate.Append(img, layers...); err != nil {
			return nil, err
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	edit(&cf.Config)
	return mutate.ConfigFile(img, cf)
}

// WithProgram is Busybox with a second layer holding program at
// /bin/<name> (0755, root's): how tests run a static helper they built in
// a pod whose Pod Security level admits no hostPath to bring it in.
func WithProgram(name string, program []byte) (v1.Image, error) {
	l, err := newLayer([]entry{dir("bin", 0o755), {Path: "bin/" + name, Type: tar.TypeReg, Mode: 0o755, Content: program}})
	if err != nil {
		return nil, err
	}
	return derive(busybox, func(*v1.Config) {}, addendum(l, "the test's program /bin/"+name))
}
