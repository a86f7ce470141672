package testimages

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// tarFile is one entry of a layer or of an image's flattened file system.
type tarFile struct {
	hdr     *tar.Header
	content string
}

func readTar(t *testing.T, r io.Reader) (map[string]tarFile, []string) {
	t.Helper()
	files := map[string]tarFile{}
	var order []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, order
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		p := strings.TrimSuffix(h.Name, "/")
		if _, dup := files[p]; dup {
			t.Errorf("%s twice in the tar", p)
		}
		files[p] = tarFile{hdr: h, content: string(b)}
		order = append(order, p)
	}
}

// layerFiles is the entries of img's layer i, in the order of the tar.
func layerFiles(t *testing.T, img v1.Image, i int) (map[string]tarFile, []string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[i].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return readTar(t, rc)
}

// flattened is img's file system as a runtime unpacks it (ggcr's
// mutate.Extract applies whiteouts and opaque dirs).
func flattened(t *testing.T, img v1.Image) map[string]tarFile {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files, _ := readTar(t, rc)
	return files
}

func config(t *testing.T, img v1.Image) *v1.ConfigFile {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func must(t *testing.T, fn func() (v1.Image, error)) v1.Image {
	t.Helper()
	return Must(t, fn)
}

// unpack writes img's file system into a new dir, as root (owners, setuid
// bits), and returns the dir. Tests that run an image's programs with
// chroot use it; they skip when not root.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running an image's programs (chroot, owners) needs root")
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	type later struct {
		path string
		hdr  *tar.Header
	}
	var dirs []later
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, later{p, h})
			continue
		case tar.TypeReg:
			var b bytes.Buffer
			if _, err := io.Copy(&b, tr); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(h.Linkname, p); err != nil {
				t.Fatal(err)
			}
			continue
		case tar.TypeLink:
			if err := os.Link(filepath.Join(root, filepath.Clean("/"+h.Linkname)), p); err != nil {
				t.Fatal(err)
			}
			continue
		default:
			t.Fatalf("%s: type %q", h.Name, h.Typeflag)
		}
		if err := os.Chown(p, h.Uid, h.Gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, h.FileInfo().Mode()); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range dirs {
		if err := os.Chown(d.path, d.hdr.Uid, d.hdr.Gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d.path, d.hdr.FileInfo().Mode()); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// run runs args (the host's chroot, setpriv, unshare...) with env and
// returns stdout; a failure fails t with stderr.
func run(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%q: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// freePort is a TCP port free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// start starts args with env in a process group of its own and returns
// what stops it (SIGKILL to the group, then wait); t's cleanup calls it too.
func start(t *testing.T, env []string, args ...string) (stop func()) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// httpGet is the body of url's 200 answer, tried for 10 s.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode == http.StatusOK {
				return string(b)
			}
			if err == nil {
				err = errors.New(resp.Status)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readAllLayers reads every layer of img to its end, as a puller does
// (ggcr checks each one's digest as it reads).
func readAllLayers(img v1.Image) error {
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		_, err = io.Copy(io.Discard, rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// inImage is a command that runs args in a chroot of root (unpack's), as a
// runtime would: in a mount namespace of its own with the host's /dev and a
// /proc; with pid, in a pid namespace of its own too (args' process is pid
// 1), with net a network namespace (loopback down), with ipc an IPC one;
// as user ("uid:gid") when given.
func inImage(root string, ns []string, user string, args ...string) *exec.Cmd {
	chroot := []string{"chroot"}
	if user != "" {
		chroot = append(chroot, "--userspec="+user)
	}
	unshare := append([]string{"unshare", "--mount", "--propagation", "private"}, ns...)
	if slices.Contains(ns, "--pid") {
		unshare = append(unshare, "--fork")
	}
	script := `mount --rbind /dev "$0/dev" && mount -t proc proc "$0/proc" && exec ` + strings.Join(chroot, " ") + ` "$0" "$@"`
	all := append(append(unshare, "/bin/sh", "-c", script, root), args...)
	return exec.Command(all[0], all[1:]...)
}

// runInImage runs inImage's command with env and returns its stdout; a
// failure fails t with stderr.
func runInImage(t *testing.T, root string, ns []string, user string, env []string, args ...string) string {
	t.Helper()
	cmd := inImage(root, ns, user, args...)
	return run(t, env, cmd.Args...)
}
