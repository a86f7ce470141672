package proc

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestNormalizeRef(t *testing.T) {
	tests := map[string]string{
		"busybox":                        "docker.io/library/busybox:latest",
		"busybox:1.36":                   "docker.io/library/busybox:1.36",
		"user/app":                       "docker.io/user/app:latest",
		"ghcr.io/o/app:v1":               "ghcr.io/o/app:v1",
		"localhost:5000/app":             "localhost:5000/app:latest",
		"localhost/app":                  "localhost/app:latest",
		"registry.k8s.io/pause@sha256:0": "registry.k8s.io/pause@sha256:0",
	}
	for in, want := range tests {
		if got := normalizeRef(in); got != want {
			t.Errorf("normalizeRef(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestImages(t *testing.T) {
	h := newHarness(t)
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
