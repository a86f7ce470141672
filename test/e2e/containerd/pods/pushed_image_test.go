package containerd_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/testimages"
)

// An image no registry has, pushed over NATS with `jetlet image push`:
// containerd pulls it through the node's loopback registry of the bus, as
// its hosts.toml says (setup.sh's certs.d/_default/hosts.toml names
// $JETLET_CONTAINERD_BUS_REGISTRY, where this node serves the bus), and a
// pod that always pulls it runs. containerd then holds the image under its
// reference with the pushed manifest's digest.
func TestPodRunsAnImagePushedOverNATS(t *testing.T) {
	s := newSuite(t)
	busRegistry := os.Getenv("JETLET_CONTAINERD_BUS_REGISTRY")
	if busRegistry == "" {
		t.Skip("JETLET_CONTAINERD_BUS_REGISTRY is not set: no hosts.toml of this containerd names a registry of the bus (setup.sh writes one)")
	}
	n := s.startNode(busRegistryFlags(t)...)
	n.waitBusRegistry()

	// registry.invalid resolves nowhere (RFC 6761): only the registry of the
	// bus has it. The label makes the image, and so its digest, this run's.
	ref := "registry.invalid/jetlet-e2e/pushed:" + s.runID
	img := stageBusybox(t, "pushed-over-nats-"+s.runID)
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := testimages.WriteOCILayout(&archive, map[string]v1.Image{ref: img}); err != nil {
		t.Fatal(err)
	}
	push := exec.Command(jetlettest.Binary(t), "image", "push", ref, "-", "--nats-url", n.proc.NATSURL(), "--data-dir", n.dataDir)
	push.Stdin = &archive
	out, err := push.CombinedOutput()
	if err != nil {
		t.Fatalf("jetlet image push: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), digest.String()) {
		t.Fatalf("jetlet image push printed %q: want the image's digest %s", out, digest)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.cri.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: ref}); err != nil {
			t.Errorf("cleanup: RemoveImage %s: %v", ref, err)
		}
	})

	uid := s.uid("pushed")
	seq := n.publish(uid, s.podJSONPulling(uid, 1, "Never", ref, "Always", "echo pulled over NATS"))
	if r := n.waitResult(uid, seq, 90*time.Second); r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	st := n.waitStatus(uid, 90*time.Second, "Succeeded", func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseSucceeded })
	n.waitEvent(uid, schemas.EventImagePulled, 30*time.Second, nil)
	s.waitLog(st.Containers[0].ContainerID, "pulled over NATS", 30*time.Second)

	// What containerd holds: the image under its reference, with the
	// digest of the manifest pushed and the id of its config.
	resp, err := s.cri.ImageStatus(context.Background(), &runtimeapi.ImageSpec{Image: ref}, false)
	if err != nil {
		t.Fatalf("ImageStatus %s: %v", ref, err)
	}
	got := resp.GetImage()
	if got == nil {
		t.Fatalf("containerd has no image %s after the pod ran", ref)
	}
	wantDigest := strings.TrimSuffix(ref, ":"+s.runID) + "@" + digest.String()
	if !slices.Contains(got.RepoDigests, wantDigest) || !slices.Contains(got.RepoTags, ref) {
		t.Errorf("containerd's image %s: tags %v, digests %v; want %s and %s", got.Id, got.RepoTags, got.RepoDigests, ref, wantDigest)
	}
	if got.Id != configDigest.String() {
		t.Errorf("containerd's image id %s, want the pushed config's %s", got.Id, configDigest)
	}
	t.Logf("pod %s ran %s (%s), pulled through http://%s", uid, ref, digest, busRegistry)
}

// busRegistryFlags has jetlet serve the images of the bus where this
// containerd's hosts.toml names them ($JETLET_CONTAINERD_BUS_REGISTRY, from
// setup.sh), or on a free port when it names none.
func busRegistryFlags(t *testing.T) []string {
	t.Helper()
	if addr := os.Getenv("JETLET_CONTAINERD_BUS_REGISTRY"); addr != "" {
		return []string{"--image-registry-listen", addr}
	}
	return nil
}

// waitBusRegistry waits for jetlet to serve the images of the bus where
// busRegistryFlags told it to (nothing to wait for when that is a free port).
func (n *node) waitBusRegistry() {
	n.t.Helper()
	addr := os.Getenv("JETLET_CONTAINERD_BUS_REGISTRY")
	if addr == "" {
		return
	}
	serving := n.proc.WaitLog("serving the images of the bus read-only (OCI distribution API)", 30*time.Second)
	if got := serving["address"]; got != "http://"+addr {
		n.t.Fatalf("jetlet serves the images of the bus on %v, want http://%s (what hosts.toml names)", got, addr)
	}
}
