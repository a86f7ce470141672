package embedded

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A runtime of host programs takes references in the normal form every user
// of them shares (schemas/imageref, containerd's): Docker Hub's legacy index
// host is docker.io, so both spellings are one image (its own normaliser kept
// index.docker.io apart), and a reference containerd refuses is refused.
func TestHostProgramsNormaliseReferencesAsContainerd(t *testing.T) {
	h := newHostProgramsHarness(t)
	ctx := ctxT(t)
	pull, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "index.docker.io/library/busybox:1.36"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}})
	if err != nil || st.GetImage().GetId() != pull.GetImageRef() || !slices.Equal(st.GetImage().GetRepoTags(), []string{"docker.io/library/busybox:1.36"}) {
		t.Fatalf("busybox:1.36 after a pull of index.docker.io/library/busybox:1.36: %v %v", st, err)
	}
	for _, ref := range []string{"", "Busybox", "busybox@sha256:0"} {
		_, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("pull %q: %v, want InvalidArgument", ref, err)
		}
	}
}

func TestImages(t *testing.T) {
	h := newHostProgramsHarness(t)
	ctx := ctxT(t)
	spec := &runtimeapi.ImageSpec{Image: "busybox:1.36"}

	st, err := h.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec})
	if err != nil || st.GetImage() != nil {
		t.Fatalf("unknown image: %v %v", st, err)
	}
	pull, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec})
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36"}})
	if err != nil || again.GetImageRef() != pull.GetImageRef() {
		t.Fatalf("same image, other spelling: %v %v", again, err)
	}
	for _, ref := range []string{"busybox:1.36", pull.GetImageRef(), pull.GetImageRef()[len("sha256:"):][:12]} {
		st, err = h.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil || st.GetImage().GetId() != pull.GetImageRef() || st.GetImage().GetRepoTags()[0] != "docker.io/library/busybox:1.36" {
			t.Fatalf("status by %q: %v %v", ref, st, err)
		}
	}
	if _, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: "alpine"}}); err != nil {
		t.Fatal(err)
	}
	list, err := h.is.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(list.GetImages()) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	fs, err := h.is.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil || len(fs.GetImageFilesystems()) != 1 {
		t.Fatalf("fs info: %v %v", fs, err)
	}

	// Images survive a restart.
	h.restart()
	for range 2 { // idempotent
		if _, err := h.is.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec}); err != nil {
			t.Fatal(err)
		}
	}
	list, err = h.is.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(list.GetImages()) != 1 || list.GetImages()[0].GetRepoTags()[0] != "docker.io/library/alpine:latest" {
		t.Fatalf("list after remove: %v %v", list, err)
	}
}

// hostExecutable is a program every test host has in the default PATH.
func hostExecutable(t *testing.T) (name string, size uint64) {
	t.Helper()
	for _, dir := range filepath.SplitList(defaultPath) {
		if fi, err := os.Stat(filepath.Join(dir, "sh")); err == nil && fi.Mode().IsRegular() {
			return "sh", uint64(fi.Size())
		}
	}
	t.Skip("no sh in " + defaultPath)
	return "", 0
}

// TestImageRecords checks what ImageStatus and ListImages report for each
// kind of reference: a sha256 id, a size k8s.io/cri-client accepts (it
// refuses 0), and repoTags/repoDigests as containerd reports them.
func TestImageRecords(t *testing.T) {
	h := newHostProgramsHarness(t)
	ctx := ctxT(t)
	const digest = "sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf"
	exe, exeSize := hostExecutable(t)
	tests := []struct {
		name        string
		ref         string
		repoTags    []string
		repoDigests []string
		size        uint64
	}{
		{name: "tag", ref: "busybox:1.36", repoTags: []string{"docker.io/library/busybox:1.36"}},
		{name: "no tag", ref: "registry.k8s.io/e2e-test-images/test-image-latest", repoTags: []string{"registry.k8s.io/e2e-test-images/test-image-latest:latest"}},
		{name: "digest", ref: "registry.k8s.io/pause@" + digest, repoDigests: []string{"registry.k8s.io/pause@" + digest}},
		// The same program as "tag": one image, its tag and now its digest.
		{name: "tag and digest", ref: "busybox:1.36@" + digest, repoTags: []string{"docker.io/library/busybox:1.36"}, repoDigests: []string{"docker.io/library/busybox@" + digest}},
		{name: "names a host executable", ref: exe + ":1", repoTags: []string{"docker.io/library/" + exe + ":1"}, size: exeSize},
		{name: "names nothing on the host", ref: "example.com/no-such-program-xyz:1", repoTags: []string{"example.com/no-such-program-xyz:1"}, size: unresolvedImageSize},
	}
	id := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &runtimeapi.ImageSpec{Image: tt.ref}
			pull, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec})
			if err != nil {
				t.Fatal(err)
			}
			st, err := h.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec})
			if err != nil {
				t.Fatal(err)
			}
			im := st.GetImage()
			if !id.MatchString(im.GetId()) || im.GetId() != pull.GetImageRef() {
				t.Errorf("id %q, pull answered %q", im.GetId(), pull.GetImageRef())
			}
			if im.GetSize() == 0 || (tt.size != 0 && im.GetSize() != tt.size) {
				t.Errorf("size %d, want %d (non-zero)", im.GetSize(), tt.size)
			}
			if !slices.Equal(im.GetRepoTags(), tt.repoTags) || !slices.Equal(im.GetRepoDigests(), tt.repoDigests) {
				t.Errorf("repoTags %q repoDigests %q, want %q %q", im.GetRepoTags(), im.GetRepoDigests(), tt.repoTags, tt.repoDigests)
			}
			// Every name it reports finds it again, with the same status.
			for _, ref := range slices.Concat([]string{im.GetId()}, im.GetRepoTags(), im.GetRepoDigests()) {
				again, err := h.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
				if err != nil || again.GetImage().GetId() != im.GetId() || again.GetImage().GetSize() != im.GetSize() {
					t.Errorf("status by %q: %v %v", ref, again, err)
				}
			}
			list, err := h.is.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: spec}})
			if err != nil || len(list.GetImages()) != 1 || list.GetImages()[0].GetSize() != im.GetSize() {
				t.Errorf("list: %v %v", list, err)
			}
		})
	}
}

// TestReferencesToOneProgramAreOneImage: tags and registries of one
// repository name one host program, so they are one image (critest's
// "exactly 3 repoTags", "removing image by one tag should remove all tags",
// "from other registries"); other repositories are other images.
func TestReferencesToOneProgramAreOneImage(t *testing.T) {
	h := newHostProgramsHarness(t)
	ctx := ctxT(t)
	pull := func(ref string) string {
		t.Helper()
		resp, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetImageRef()
	}
	tags := []string{"registry.k8s.io/e2e-test-images/test-image-tags:1", "registry.k8s.io/e2e-test-images/test-image-tags:2", "registry.k8s.io/e2e-test-images/test-image-tags:3"}
	id := pull(tags[0])
	if pull(tags[1]) != id || pull(tags[2]) != id || pull(tags[0]) != id {
		t.Fatal("tags of one repository pulled as different images")
	}
	if pull("registry.k8s.io/e2e-test-images/test-image-1:latest") == id {
		t.Fatal("another repository pulled as the same image")
	}
	list, err := h.is.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: id}}})
	if err != nil || len(list.GetImages()) != 1 || !slices.Equal(list.GetImages()[0].GetRepoTags(), tags) {
		t.Fatalf("list: %v %v, want one image tagged %q", list, err, tags)
	}
	// Removing it by one tag removes every tag.
	if _, err := h.is.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: tags[1]}}); err != nil {
		t.Fatal(err)
	}
	for _, ref := range tags {
		st, err := h.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil || st.GetImage() != nil {
			t.Fatalf("%s after removing %s: %v %v", ref, tags[1], st, err)
		}
	}
	// One program in two registries is one image.
	if pull("registry.k8s.io/pause:3.9") != pull("k8s.gcr.io/pause:3.9") {
		t.Fatal("pause from two registries pulled as different images")
	}
}

// TestAnEarlierRecordsTagMovesToItsImage: a record of the earlier scheme (an
// id per reference) still answers by its tag, and a pull of that tag moves
// it to the program's image, dropping the record left with no reference.
func TestAnEarlierRecordsTagMovesToItsImage(t *testing.T) {
	h := newHostProgramsHarness(t)
	ctx := ctxT(t)
	const ref = "docker.io/library/busybox:1.36"
	h.rt.mu.Lock()
	h.rt.images["sha256:0123"] = &image{ID: "sha256:0123", RepoTags: []string{ref}}
	h.rt.mu.Unlock()
	spec := &runtimeapi.ImageSpec{Image: "busybox:1.36"}
	st, err := h.is.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec})
	if err != nil || st.GetImage().GetId() != "sha256:0123" {
		t.Fatalf("status of the earlier record by its tag: %v %v", st, err)
	}
	pull, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec})
	if err != nil || pull.GetImageRef() == "sha256:0123" {
		t.Fatalf("pull: %v %v", pull, err)
	}
	list, err := h.is.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(list.GetImages()) != 1 || list.GetImages()[0].GetId() != pull.GetImageRef() {
		t.Fatalf("list: %v %v, want the one image %s", list, err, pull.GetImageRef())
	}
}

// TestImageRecordWithoutSize: a record from before sizes were kept still
// reports a size k8s.io/cri-client accepts.
func TestImageRecordWithoutSize(t *testing.T) {
	old := &image{ID: imageID("docker.io/library/busybox:1.36"), RepoTags: []string{"docker.io/library/busybox:1.36"}}
	if got := old.cri().GetSize(); got != unresolvedImageSize {
		t.Fatalf("size %d, want %d", got, unresolvedImageSize)
	}
}

// TestPullImageEndedContext: a pull whose context has ended records nothing
// and answers as containerd does. The calls go to the Runtime itself (a
// gRPC client would give up on its own before sending), so the test converts
// its error as the server's boundary does.
func TestPullImageEndedContext(t *testing.T) {
	h := newHarness(t)
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Unix(1, 0))
	defer cancelExpired()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		want codes.Code
	}{
		{"deadline passed", expired, codes.DeadlineExceeded},
		{"canceled", canceled, codes.Canceled},
	}
	spec := &runtimeapi.ImageSpec{Image: "busybox:1.36"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.rt.PullImage(tt.ctx, &runtimeapi.PullImageRequest{Image: spec})
			if status.Code(toGRPC(err)) != tt.want || resp.GetImageRef() != "" {
				t.Fatalf("got %v, %v; want code %s", resp, err, tt.want)
			}
			st, err := h.is.ImageStatus(ctxT(t), &runtimeapi.ImageStatusRequest{Image: spec})
			if err != nil || st.GetImage() != nil {
				t.Fatalf("a failed pull recorded the image: %v %v", st, err)
			}
		})
	}
}
