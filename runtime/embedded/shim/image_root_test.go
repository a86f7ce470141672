package shim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// imageLayers writes two unpacked layers in overlayfs's format, as the
// image store leaves them, and returns them top first:
//
//	bottom: /bin/busybox (the host's busybox-static), /bin/{sh,cat,ls,echo}
//	        links to it, /etc/a ("bottom"), /etc/gone, /opt/dir/old,
//	        /srv/data/file ("volume")
//	top:    /etc/a ("top"), a whiteout of /etc/gone, /opt/dir opaque
//	        holding /opt/dir/new
func imageLayers(t *testing.T) []string {
	t.Helper()
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skip("no /bin/busybox (busybox-static) on this host: the image's programs come from it")
	}
	layers := t.TempDir()
	bottom, top := filepath.Join(layers, "bottom"), filepath.Join(layers, "top")
	write := func(path, data string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bottom, "bin/busybox"), string(busybox), 0o755)
	for _, applet := range []string{"sh", "cat", "ls", "echo"} {
		if err := os.Symlink("busybox", filepath.Join(bottom, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(bottom, "etc/a"), "bottom", 0o644)
	write(filepath.Join(bottom, "etc/gone"), "x", 0o644)
	write(filepath.Join(bottom, "opt/dir/old"), "old", 0o644)
	write(filepath.Join(bottom, "srv/data/file"), "volume", 0o644)
	write(filepath.Join(top, "etc/a"), "top", 0o644)
	if err := unix.Mknod(filepath.Join(top, "etc/gone"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(top, "opt/dir/new"), "new", 0o644)
	if err := unix.Setxattr(filepath.Join(top, "opt/dir"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Skipf("trusted xattrs refused on the test's file system (%v): the layers cannot be overlayfs's", err)
	}
	return []string{top, bottom}
}

func imageRoot(t *testing.T, layers []string) (*Rootfs, string) {
	t.Helper()
	rw := t.TempDir()
	return &Rootfs{Layers: layers, Upper: filepath.Join(rw, "upper"), Work: filepath.Join(rw, "work")}, rw
}

// A container whose root is its image sees the merged layers (the top's
// files, whiteouts and opaque dirs honoured) and nothing of the host; what
// it writes lands in its upper dir only.
func TestShimImageRoot(t *testing.T) {
	layers := imageLayers(t)
	rootfs, _ := imageRoot(t, layers)
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities), Rootfs: rootfs}
	dir := newContainer(t, iso, nil, sh(
		"cat /etc/a; echo; ls /etc; ls /opt/dir; ls /usr /home /var 2>&1; echo written > /etc/new && cat /etc/new; ls /dev/null /proc/self/status")...)
	res := runTestPod(t, podStep{Dir: dir})
	wantRun(t, res[0], "top\na\nnew\n", "written\n", "/dev/null\n/proc/self/status\n")
	for _, host := range []string{"/usr", "/home", "/var"} {
		if !strings.Contains(res[0].Output, "ls: "+host+": No such file or directory") {
			t.Errorf("the container sees the host's %s:\n%s", host, res[0].Output)
		}
	}
	if b, err := os.ReadFile(filepath.Join(rootfs.Upper, "etc/new")); err != nil || string(b) != "written\n" {
		t.Errorf("the upper dir holds %q, %v; want what the container wrote", b, err)
	}
	for _, l := range layers {
		if _, err := os.Stat(filepath.Join(l, "etc/new")); err == nil {
			t.Errorf("the container wrote into its image's layer %s", l)
		}
	}
}

func TestShimImageRootReadonly(t *testing.T) {
	rootfs, _ := imageRoot(t, imageLayers(t))
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities), Rootfs: rootfs, ReadonlyRootfs: true}
	dir := newContainer(t, iso, nil, sh("echo x > /etc/a; cat /etc/a")...)
	res := runTestPod(t, podStep{Dir: dir})
	wantRun(t, res[0], "Read-only file system", "top")
}

// An image volume is the image's merged tree, or a sub path of it, read
// only.
func TestShimImageVolume(t *testing.T) {
	layers := imageLayers(t)
	rootfs, _ := imageRoot(t, layers)
	iso := &Isolation{
		Capabilities: capsOf(defaultCapabilities),
		Rootfs:       rootfs,
		Mounts: []Mount{
			{Type: "image", Layers: layers, Destination: "/image"},
			{Type: "image", Layers: layers, SubPath: "srv/data", Destination: "/data"},
			{Type: "image", Layers: layers[1:], SubPath: "etc", Destination: "/bottom-etc"},
		},
	}
	dir := newContainer(t, iso, nil, sh(
		"cat /image/etc/a; echo; ls /image/opt/dir; cat /data/file; echo; cat /bottom-etc/a; echo; echo x > /data/file; echo x > /bottom-etc/a")...)
	res := runTestPod(t, podStep{Dir: dir})
	if !strings.Contains(res[0].Output, "top\nnew\nvolume\nbottom\n") || strings.Count(res[0].Output, "Read-only file system") != 2 {
		t.Errorf("want the merged image, its sub path and a one-layer image read only; got start error %q, output:\n%s", res[0].StartErr, res[0].Output)
	}
}

// Where overlayfs cannot stack the layers, the root is a copy of the merged
// image in the upper dir, made once: the same tree, whiteouts and opaque
// dirs honoured, and a second start keeps what the first wrote.
func TestShimImageRootCopy(t *testing.T) {
	rootfs, _ := imageRoot(t, imageLayers(t))
	rootfs.Copy = true
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities), Rootfs: rootfs}
	first := newContainer(t, iso, nil, sh("cat /etc/a; echo; ls /etc; ls /opt/dir; cat /etc/new 2>&1; echo kept > /etc/new")...)
	second := newContainer(t, iso, nil, sh("cat /etc/new")...)
	res := runTestPod(t, podStep{Dir: first}, podStep{Dir: second})
	wantRun(t, res[0], "top\na\nnew\n", "cat: can't open '/etc/new': No such file or directory")
	wantRun(t, res[1], "kept\n")
	for _, gone := range []string{"etc/gone", "opt/dir/old"} {
		if _, err := os.Lstat(filepath.Join(rootfs.Upper, gone)); err == nil {
			t.Errorf("the copy holds %s, which the top layer removes", gone)
		}
	}
	if fi, err := os.Stat(filepath.Join(rootfs.Upper, "bin/busybox")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the copy's /bin/busybox: %v, %v; want mode 755", fi, err)
	}
}
