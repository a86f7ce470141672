package imagegc

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/embedded"
	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/testimages"
)

// The CRI client is the collector's runtime as it is.
var _ ImageGCRuntime = (*runtime.Client)(nil)

// embeddedRuntime starts the embedded runtime in-process on a fresh state
// dir and returns a client of it and the dir; cleanup removes every sandbox
// (and so every container) and fails the test on a shim left running.
func embeddedRuntime(t *testing.T) (*runtime.Client, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "jig") // short: the socket path is limited
	if err != nil {
		t.Fatal(err)
	}
	bridge, cidr := cnitest.Bridge(t)
	client := jetlettest.StartEmbedded(t, embedded.Config{Dir: filepath.Join(dir, "state"), ShimPath: gobuild.Shim.Path(t), PodBridge: bridge, PodCIDR: cidr}, dir)
	return client, dir
}

// runContainer runs a sandbox and in it a container of image, and returns
// the sandbox's id.
func runContainer(t *testing.T, client *runtime.Client, dir, image string) string {
	t.Helper()
	ctx := t.Context()
	sandbox := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "uid-p", Namespace: "default"},
		LogDirectory: filepath.Join(dir, "logs"),
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}},
	}
	if err := os.MkdirAll(sandbox.LogDirectory, 0o755); err != nil {
		t.Fatal(err)
	}
	sandboxID, err := client.RunPodSandbox(ctx, sandbox, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	id, err := client.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  []string{"/bin/sleep", "3600"},
		LogPath:  "app.log",
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}, sandbox)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := client.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return sandboxID
}

// heldImages is the references of the images the runtime holds, by id.
func heldImages(t *testing.T, client *runtime.Client) map[string]*runtimeapi.Image {
	t.Helper()
	list, err := client.ListImages(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]*runtimeapi.Image{}
	for _, im := range list {
		held[im.GetId()] = im
	}
	return held
}

// Against the embedded runtime: three images pulled, a container running
// one. Nothing goes while the images are younger than MinAge; then the
// unused images go, for space and for eviction, and the one a container
// uses stays until its container is gone.
func TestCollectsTheEmbeddedRuntimesImages(t *testing.T) {
	client, dir := embeddedRuntime(t)
	registry := testimages.Serve(t, map[string]v1.Image{
		"jetlet/kept:1":     testimages.Must(t, testimages.Busybox),
		"jetlet/unused-a:1": testimages.Must(t, testimages.Httpd),
		"jetlet/unused-b:1": testimages.Must(t, testimages.NonRoot),
	})
	pull := func(name string) string {
		t.Helper()
		ref := registry + "/jetlet/" + name + ":1"
		id, err := client.PullImage(t.Context(), &runtimeapi.ImageSpec{Image: ref}, nil, nil)
		if err != nil {
			t.Fatalf("PullImage %s: %v", ref, err)
		}
		return id
	}
	kept, unusedA := pull("kept"), pull("unused-a")
	sandboxID := runContainer(t, client, dir, registry+"/jetlet/kept:1")

	clock := &fakeClock{now: time.Now()}
	m, err := New(client, Config{Policy: DefaultPolicy(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	var measured string
	var fs filesystemStats
	m.statfs = func(path string) (filesystemStats, error) {
		measured = path
		if _, err := statfs(path); err != nil {
			return filesystemStats{}, err
		}
		return fs, nil
	}

	names := map[string]bool{}
	for _, im := range m.NodeImages(t.Context()) {
		for _, n := range im.Names {
			names[n] = true
		}
	}
	if !names[registry+"/jetlet/kept:1"] || !names[registry+"/jetlet/unused-a:1"] {
		t.Fatalf("NodeImages names %v, want both images' tags", names)
	}

	// At first, every image is younger than MinAge.
	if freed, err := m.DeleteUnusedImages(t.Context()); err != nil || freed != 0 {
		t.Fatalf("DeleteUnusedImages at once = %d, %v; want nothing freed", freed, err)
	}
	clock.Advance(time.Minute)
	unusedB := pull("unused-b")

	// Over the high threshold, 85% used, with bytes to free for 80% that
	// unused-a's alone makes: it goes (the oldest), unused-b is too young,
	// kept is in use.
	sizeA := int64(heldImages(t, client)[unusedA].GetSize())
	fs = filesystemStats{capacity: 20 * sizeA, available: 3 * sizeA}
	clock.Advance(2 * time.Minute)
	if err := m.GarbageCollect(t.Context()); err != nil {
		t.Fatalf("GarbageCollect: %v", err)
	}
	if !strings.HasPrefix(measured, dir) {
		t.Errorf("measured the file system of %q, want the runtime's image store under %s", measured, dir)
	}
	held := heldImages(t, client)
	if _, ok := held[unusedA]; ok || held[kept] == nil || held[unusedB] == nil {
		t.Fatalf("after GarbageCollect the runtime holds %v; want %s (kept) and %s (unused-b), not %s (unused-a)", slices.Collect(maps.Keys(held)), kept, unusedB, unusedA)
	}

	// For eviction, every unused image old enough goes.
	clock.Advance(2 * time.Minute)
	sizeB := int64(held[unusedB].GetSize())
	if freed, err := m.DeleteUnusedImages(t.Context()); err != nil || freed != sizeB {
		t.Fatalf("DeleteUnusedImages = %d, %v; want unused-b's %d bytes", freed, err, sizeB)
	}
	if held := heldImages(t, client); len(held) != 1 || held[kept] == nil {
		t.Fatalf("after DeleteUnusedImages the runtime holds %v, want only %s (kept, in use)", slices.Collect(maps.Keys(held)), kept)
	}

	// Once its container is gone, the image is unused too.
	if err := client.StopPodSandbox(t.Context(), sandboxID); err != nil {
		t.Fatal(err)
	}
	if err := client.RemovePodSandbox(t.Context(), sandboxID); err != nil {
		t.Fatal(err)
	}
	if freed, err := m.DeleteUnusedImages(t.Context()); err != nil || freed == 0 || len(heldImages(t, client)) != 0 {
		t.Fatalf("DeleteUnusedImages with no container left = %d, %v; want kept removed", freed, err)
	}
}
