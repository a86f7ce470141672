package embedded

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestCreateContainerErrors(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.pod("p", nil)
	for _, ref := range []string{testImage, noCommandImage} {
		if _, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		sandbox string
		cfg     *runtimeapi.ContainerConfig
		code    codes.Code
		msg     string
	}{
		{"no command, none in the image", sb, func() *runtimeapi.ContainerConfig {
			c := containerConfig("c", nil)
			c.Image.Image = noCommandImage
			return c
		}(), codes.InvalidArgument, "no command"},
		{"no metadata", sb, &runtimeapi.ContainerConfig{Command: []string{"true"}}, codes.InvalidArgument, "metadata"},
		{"unknown sandbox", "nope", containerConfig("c", nil, "true"), codes.NotFound, "sandbox"},
		{"image not pulled", sb, func() *runtimeapi.ContainerConfig {
			c := containerConfig("c", nil, "true")
			c.Image.Image = "example.com/never:pulled"
			return c
		}(), codes.NotFound, "pull it first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: tt.sandbox, Config: tt.cfg, SandboxConfig: sbCfg})
			wantCode(t, err, tt.code)
			if !strings.Contains(status.Convert(err).Message(), tt.msg) {
				t.Fatalf("message %q does not mention %q", status.Convert(err).Message(), tt.msg)
			}
		})
	}
	// The same name and attempt is reserved while the container exists.
	h.create(sb, sbCfg, containerConfig("dup", nil, "true"))
	_, err := h.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("dup", nil, "true")})
	wantCode(t, err, codes.AlreadyExists)
}

func TestContainerStatusFields(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	cfg := containerConfig("c", map[string]string{"io.kubernetes.container.name": "c"}, "sh", "-c", "exit 0")
	cfg.Annotations = map[string]string{"io.kubernetes.container.hash": "abc123", "io.kubernetes.container.restartCount": "2"}
	cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: h.dir}}
	id := h.create(sb, sbCfg, cfg)

	st := h.status(id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED || st.GetCreatedAt() == 0 || st.GetStartedAt() != 0 {
		t.Fatalf("created status = %v", st)
	}
	h.startC(id)
	st = h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.GetStartedAt() < st.GetCreatedAt() || st.GetFinishedAt() < st.GetStartedAt() {
		t.Fatalf("times: created %d started %d finished %d", st.GetCreatedAt(), st.GetStartedAt(), st.GetFinishedAt())
	}
	if st.GetAnnotations()["io.kubernetes.container.hash"] != "abc123" || st.GetAnnotations()["io.kubernetes.container.restartCount"] != "2" ||
		st.GetLabels()["io.kubernetes.container.name"] != "c" || len(st.GetLabels()) != 1 || len(st.GetAnnotations()) != 2 {
		t.Fatalf("labels %v annotations %v", st.GetLabels(), st.GetAnnotations())
	}
	if st.GetImage().GetImage() != testImage || !strings.HasPrefix(st.GetImageRef(), "sha256:") {
		t.Fatalf("image %v ref %q", st.GetImage(), st.GetImageRef())
	}
	if st.GetLogPath() != sbCfg.GetLogDirectory()+"/c.log" {
		t.Fatalf("log path %q", st.GetLogPath())
	}
	if len(st.GetMounts()) != 2 || st.GetMounts()[0].GetContainerPath() != "/data" { // and the harness's shared dir
		t.Fatalf("mounts %v", st.GetMounts())
	}
	if st.GetMetadata().GetName() != "c" {
		t.Fatalf("metadata %v", st.GetMetadata())
	}
}

// A runtime of host programs has no entrypoint to run: a container needs a
// command.
func TestCreateContainerOfHostProgramsNeedsACommand(t *testing.T) {
	h := newHostProgramsHarness(t)
	sb, sbCfg := h.pod("p", nil)
	if _, err := h.is.PullImage(ctxT(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: testImage}}); err != nil {
		t.Fatal(err)
	}
	_, err := h.rs.CreateContainer(ctxT(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: containerConfig("c", nil), SandboxConfig: sbCfg})
	wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(status.Convert(err).Message(), "no command") {
		t.Fatalf("message %q does not say there is no command", status.Convert(err).Message())
	}
}
