package containerd_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/imagegc"
	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/test/testimages"
)

// runImages is containerd as this test's image collector sees it: only the
// images the test names are listed, so that it never removes the stage's
// own (the busybox and pause images the other tests run, which no registry
// has). Removals, containers and the image file system are containerd's.
type runImages struct {
	*runtime.Client
	ids map[string]bool
}

func (r runImages) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	all, err := r.Client.ListImages(ctx, filter)
	return slices.DeleteFunc(all, func(im *runtimeapi.Image) bool { return !r.ids[im.GetId()] }), err
}

// stepClock is a clock the test moves.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }

// Image garbage collection against containerd: two images of this run
// pulled, a container running one. The image no container uses goes once it
// has been unused for longer than the maximum age; the one a container uses
// stays until its container is gone; the sandbox image, which containerd 2
// pins, never goes.
func TestImageGarbageCollectionOnContainerd(t *testing.T) {
	s := newSuite(t)
	ctx := t.Context()
	tag := func(name string) string { return "jetlet-imagegc/" + name + ":" + s.runID }
	registry := testimages.Serve(t, map[string]v1.Image{
		tag("kept"):   stageBusybox(t, "imagegc-kept-"+s.runID),
		tag("unused"): stageBusybox(t, "imagegc-unused-"+s.runID),
	})
	view := runImages{Client: s.cri, ids: map[string]bool{}}
	pull := func(name string) string {
		t.Helper()
		ref := registry + "/" + tag(name)
		id, err := s.cri.PullImage(ctx, &runtimeapi.ImageSpec{Image: ref}, nil, nil)
		if err != nil {
			t.Fatalf("PullImage %s: %v", ref, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := s.cri.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: ref}); err != nil {
				t.Errorf("cleanup: RemoveImage %s: %v", ref, err)
			}
		})
		st, err := s.cri.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
		if err != nil || st.GetImage() == nil {
			t.Fatalf("ImageStatus %s after the pull (%s): %v, %v", ref, id, st, err)
		}
		view.ids[st.GetImage().GetId()] = true
		return st.GetImage().GetId()
	}
	kept, unused := pull("kept"), pull("unused")

	all, err := s.cri.ListImages(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	pinned := ""
	for _, im := range all {
		if im.GetPinned() {
			pinned = im.GetId()
			view.ids[pinned] = true
			t.Logf("containerd pins %s (%v): the collector sees it too", pinned, im.GetRepoTags())
		}
	}
	if pinned == "" {
		t.Logf("containerd pins no image (containerd before 1.7 does not say Image.Pinned): the collector sees only this run's images")
	}

	sandbox := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "imagegc-" + s.runID, Uid: s.uid("imagegc"), Namespace: "default"},
		Labels:       map[string]string{runLabel: s.runID},
		LogDirectory: shortDir(t),
		Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: s.directCgroupParent(t), SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}},
	}
	sandboxID, err := s.cri.RunPodSandbox(ctx, sandbox, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	containerID, err := s.cri.CreateContainer(ctx, sandboxID, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: kept},
		Command:  []string{"/bin/sh", "-c", untilTerm},
		Labels:   map[string]string{runLabel: s.runID},
		LogPath:  "app.log",
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}, sandbox)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := s.cri.StartContainer(ctx, containerID); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}

	// The space threshold is off (100%): only the maximum age removes.
	clock := &stepClock{now: time.Now()}
	m, err := imagegc.New(view, imagegc.Config{
		Policy: imagegc.Policy{HighThresholdPercent: 100, LowThresholdPercent: 99, MinAge: time.Minute, MaxAge: time.Hour},
		Clock:  clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	held := func() []string {
		t.Helper()
		list, err := view.ListImages(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids := map[string]bool{}
		for _, im := range list {
			ids[im.GetId()] = true
		}
		return slices.Sorted(maps.Keys(ids))
	}
	want := func(ids ...string) []string {
		if pinned != "" {
			ids = append(ids, pinned)
		}
		slices.Sort(ids)
		return ids
	}

	names := map[string]bool{}
	for _, im := range m.NodeImages(ctx) {
		for _, n := range im.Names {
			names[n] = true
		}
	}
	if !names[registry+"/"+tag("kept")] || !names[registry+"/"+tag("unused")] {
		t.Errorf("NodeImages names %v: want both images' tags", slices.Sorted(maps.Keys(names)))
	}

	// Before jetlet has run for MaxAge, nothing is old enough.
	if err := m.GarbageCollect(ctx); err != nil {
		t.Fatalf("GarbageCollect at the start: %v", err)
	}
	if got := held(); !slices.Equal(got, want(kept, unused)) {
		t.Fatalf("after GarbageCollect at the start containerd holds %v, want %v", got, want(kept, unused))
	}

	clock.now = clock.now.Add(2 * time.Hour)
	if err := m.GarbageCollect(ctx); err != nil {
		t.Fatalf("GarbageCollect two hours on: %v", err)
	}
	if got := held(); !slices.Equal(got, want(kept)) {
		t.Fatalf("after GarbageCollect two hours on containerd holds %v, want %v (%s unused, removed)", got, want(kept), unused)
	}

	// Once its container is gone, the kept image is unused too: eviction's
	// DeleteUnusedImages removes it.
	if err := s.cri.StopPodSandbox(ctx, sandboxID); err != nil {
		t.Fatal(err)
	}
	if err := s.cri.RemovePodSandbox(ctx, sandboxID); err != nil {
		t.Fatal(err)
	}
	if freed, err := m.DeleteUnusedImages(ctx); err != nil || freed <= 0 {
		t.Fatalf("DeleteUnusedImages with the container gone = %d, %v; want the kept image's bytes", freed, err)
	}
	if got := held(); !slices.Equal(got, want()) {
		t.Fatalf("after DeleteUnusedImages containerd holds %v, want %v", got, want())
	}
}
