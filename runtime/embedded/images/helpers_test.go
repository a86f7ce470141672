package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// testRegistry is ggcr's in-memory registry served on 127.0.0.1, counting
// the requests it gets. Images are pushed through a second server on the
// same handler, which counts nothing and asks no credentials.
type testRegistry struct {
	host string // 127.0.0.1:port of the counted server
	push string // 127.0.0.1:port of the push server

	mu       sync.Mutex
	gets     map[string]int  // GETs by path; guarded by mu
	requests []*http.Request // every request; guarded by mu
}

func newTestRegistry(t testing.TB, wrap func(http.Handler) http.Handler) *testRegistry {
	t.Helper()
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r := &testRegistry{gets: make(map[string]int)}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		if req.Method == http.MethodGet {
			r.gets[req.URL.Path]++
		}
		r.requests = append(r.requests, req.Clone(req.Context()))
		r.mu.Unlock()
		inner.ServeHTTP(w, req)
	})
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	pushSrv := httptest.NewServer(inner)
	t.Cleanup(pushSrv.Close)
	r.host = strings.TrimPrefix(srv.URL, "http://")
	r.push = strings.TrimPrefix(pushSrv.URL, "http://")
	return r
}

// pushImage stores img as repoTag ("app:1") and returns the reference
// pulls use.
func (r *testRegistry) pushImage(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref, err := name.ParseReference(r.push+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(authn.Anonymous)); err != nil {
		t.Fatalf("push %s: %v", repoTag, err)
	}
	return r.host + "/" + repoTag
}

func (r *testRegistry) pushIndex(t testing.TB, repoTag string, idx v1.ImageIndex) string {
	t.Helper()
	ref, err := name.ParseReference(r.push+"/"+repoTag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatalf("push %s: %v", repoTag, err)
	}
	return r.host + "/" + repoTag
}

// blobGets counts the GETs of the blob h, in any repository.
func (r *testRegistry) blobGets(h v1.Hash) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for p, c := range r.gets {
		if strings.HasSuffix(p, "/blobs/"+h.String()) {
			n += c
		}
	}
	return n
}

func (r *testRegistry) getCount(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gets[path]
}

func (r *testRegistry) seen() []*http.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.requests)
}

// tentry is an entry of a test layer.
type tentry struct {
	name   string
	typ    byte // tar.TypeReg when 0
	body   string
	link   string
	mode   int64
	uid    int
	gid    int
	xattrs map[string]string
}

func file(name, body string, mode int64) tentry {
	return tentry{name: name, typ: tar.TypeReg, body: body, mode: mode}
}
func dir(name string, mode int64) tentry { return tentry{name: name, typ: tar.TypeDir, mode: mode} }
func symlink(name, target string) tentry {
	return tentry{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(name, target string) tentry {
	return tentry{name: name, typ: tar.TypeLink, link: target}
}
func whiteout(name string) tentry {
	d, b := filepath.Split(name)
	return file(d+".wh."+b, "", 0o644)
}

// layerTime is every test entry's modification time.
var layerTime = time.Unix(1_700_000_000, 123_000_000)

func layerTar(t testing.TB, entries ...tentry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		hdr := &tar.Header{
			Name: e.name, Typeflag: typ, Linkname: e.link, Mode: e.mode,
			Uid: e.uid, Gid: e.gid, ModTime: layerTime, Format: tar.FormatPAX,
		}
		if typ == tar.TypeReg {
			hdr.Size = int64(len(e.body))
		}
		if typ == tar.TypeChar {
			hdr.Devmajor, hdr.Devminor = 1, 3
		}
		for k, v := range e.xattrs {
			if hdr.PAXRecords == nil {
				hdr.PAXRecords = make(map[string]string)
			}
			hdr.PAXRecords["SCHILY.xattr."+k] = v
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func layer(t testing.TB, entries ...tentry) v1.Layer {
	t.Helper()
	b := layerTar(t, entries...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// testImage is an image of the layers for this machine's platform,
// labelled so that images of the same layers differ.
func testImage(t testing.TB, label string, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Env = []string{"PATH=/usr/bin:/bin"}
	cf.Config.Entrypoint = []string{"/bin/sh"}
	cf.Config.Cmd = []string{"-c", "true"}
	cf.Config.WorkingDir = "/work"
	cf.Config.User = "1000:1000"
	cf.Config.StopSignal = "SIGINT"
	cf.Config.Volumes = map[string]struct{}{"/data": {}, "/cache": {}}
	cf.Config.Labels = map[string]string{"test": label}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func simpleImage(t testing.TB, label string) v1.Image {
	return testImage(t, label, layer(t, file("etc/label", label, 0o644)))
}

func configName(t testing.TB, img v1.Image) string {
	t.Helper()
	h, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

func digestOf(t testing.TB, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func openStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "images")
	}
	if opts.Logger.GetLevel() == zerolog.TraceLevel { // the zero Logger
		opts.Logger = zerolog.Nop()
	}
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// layerEntries lists layers/ (temporary dirs included).
func layerEntries(t testing.TB, s *Store) []string {
	t.Helper()
	entries, err := os.ReadDir(s.layersDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// mountOverlay mounts a read-only overlay of the lower dirs (top first)
// and returns where.
func mountOverlay(t testing.TB, lower []string) string {
	t.Helper()
	mnt := t.TempDir()
	if err := unix.Mount("overlay", mnt, "overlay", unix.MS_RDONLY, "lowerdir="+strings.Join(lower, ":")); err != nil {
		t.Skipf("overlayfs cannot be mounted here (needs root and overlay support): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

// describeTree lists every path under root as "path type mode uid:gid
// [-> target] [content]", sorted.
func describeTree(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		line := fmt.Sprintf("%s %s %04o %d:%d", rel, typeName(st.Mode), st.Mode&0o7777, st.Uid, st.Gid)
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line = fmt.Sprintf("%s %s -> %s", rel, typeName(st.Mode), target)
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %q", b)
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFREG:
		return "file"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFCHR:
		return "chardev"
	}
	return "other"
}
