package e2e_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/testimages"
)

// An image no registry has, pushed over NATS with `jetlet image push`: the
// node's embedded runtime pulls it through the node's own registry of the
// bus, and a pod that always pulls it runs its entrypoint.
func TestAPodRunsAnImagePushedOverNATS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the embedded runtime runs images as root only")
	}
	dir := shortDir(t)
	n := startNode(t, dir, "")
	const ref = "registry.invalid/team/layered:1"
	var archive bytes.Buffer
	if err := testimages.WriteOCILayout(&archive, map[string]v1.Image{ref: testimages.Must(t, testimages.Layered)}); err != nil {
		t.Fatal(err)
	}
	push := exec.Command(jetlettest.Binary(t), "image", "push", ref, "-", "--nats-url", n.proc.NATSURL(), "--data-dir", dir)
	push.Stdin = &archive
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("jetlet image push: %v\n%s", err, out)
	}
	ls, err := exec.Command(jetlettest.Binary(t), "image", "ls", "--nats-url", n.proc.NATSURL(), "--data-dir", dir).CombinedOutput()
	if err != nil || !bytes.Contains(ls, []byte(ref)) {
		t.Fatalf("jetlet image ls: %v\n%s", err, ls)
	}
	pod := imagePodJSON("pushed", ref)
	n.publish("pushed", pod)
	n.waitStatus("pushed", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseSucceeded })
	log := filepath.Join(dir, "logs", "default_p-pushed_pushed", "app", "0.log")
	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(" stdout F "+testimages.LayeredGreeting+" in /opt/layered\n")) {
		t.Errorf("the pod's log does not show the image's entrypoint ran:\n%s", data)
	}
}

// The README's offline image: a root directory of Debian's busybox-static
// and its applets as symlinks, made an image with `jetlet image import ROOT
// REF` (as docker import makes one of a tarball, its config from --change)
// and loaded into the running node; a pod runs it, finding sh through the
// image's PATH.
func TestReadmeOfflineImageFromARootDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the embedded runtime runs images as root only")
	}
	dir := shortDir(t)
	n := startNode(t, dir, "")
	root := filepath.Join(t.TempDir(), "rootfs")
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile(testimages.BusyboxPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), program, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, applet := range []string{"sh", "echo", "cat"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	const ref = "docker.io/library/busybox:readme"
	imp := exec.Command(jetlettest.Binary(t), "image", "import", "--data-dir", dir, root, ref,
		"--change", "ENV PATH=/bin", "--change", `CMD ["sh"]`)
	out, err := imp.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte(ref)) {
		t.Fatalf("jetlet image import %s %s: %v\n%s", root, ref, err, out)
	}
	n.publish("readme", `{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"p-readme","namespace":"default","uid":"readme"},
	    "spec":{"restartPolicy":"Never","terminationGracePeriodSeconds":5,
	      "containers":[{"name":"app","image":"busybox:readme","command":["sh","-c","echo offline on $PATH"]}]}}}`)
	n.waitStatus("readme", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseSucceeded })
	data, err := os.ReadFile(filepath.Join(dir, "logs", "default_p-readme_readme", "app", "0.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(" stdout F offline on /bin\n")) {
		t.Errorf("the pod's log does not show the image's sh ran with its PATH:\n%s", data)
	}
}
