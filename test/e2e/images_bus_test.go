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
