package embedded

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/test/testimages"
)

// requireImages skips a test of images on a runtime that runs host
// programs (one that is not root).
func requireImages(t *testing.T, h *harness) {
	t.Helper()
	if h.rt.store == nil {
		t.Skip("the runtime is not root: it runs host programs, not images")
	}
}

func (h *harness) pull(ref string, auth *runtimeapi.AuthConfig) (string, error) {
	resp, err := h.is.PullImage(ctxT(h.t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}, Auth: auth})
	return resp.GetImageRef(), err
}

// runImage runs a container of image with its own entrypoint and cmd (and
// args, when given) to its end and returns its output lines.
func (h *harness) runImage(sb string, sbCfg *runtimeapi.PodSandboxConfig, name, image string, adjust func(*runtimeapi.ContainerConfig)) string {
	h.t.Helper()
	if _, err := h.pull(image, nil); err != nil {
		h.t.Fatal(err)
	}
	cfg := containerConfig(name, nil)
	cfg.Image.Image = image
	if adjust != nil {
		adjust(cfg)
	}
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)
	st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.GetExitCode() != 0 {
		h.t.Fatalf("%s exited %d: %s", name, st.GetExitCode(), st.GetMessage())
	}
	data, err := os.ReadFile(st.GetLogPath())
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if _, content, ok := strings.Cut(l, " stdout F "); ok {
			out = append(out, content)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

// A container's root is its image, layer over layer, and it runs its
// image's entrypoint, cmd, env and working dir unless its config says
// otherwise (Kubernetes' command and args rules).
func TestAContainerRunsItsImage(t *testing.T) {
	h := newHarness(t)
	requireImages(t, h)
	sb, sbCfg := h.pod("p", nil)
	if got := h.runImage(sb, sbCfg, "as-is", "layered:1", nil); got != testimages.LayeredOutput {
		t.Errorf("the image as it is printed %q, want %q", got, testimages.LayeredOutput)
	}
	// args replace the image's cmd, and run under its entrypoint.
	got := h.runImage(sb, sbCfg, "args", "layered:1", func(c *runtimeapi.ContainerConfig) {
		c.Args = []string{"sh", "-c", `ls -A /var/www; ls -A /usr/sbin; cat symlink.txt hardlink.txt; stat -c '%a %u:%g %h' owned.txt hello.txt; echo "$LAYERED_GREETING/$OWN"`}
		c.Envs = []*runtimeapi.KeyValue{{Key: "OWN", Value: []byte("mine")}}
	})
	want := testimages.LayeredGreeting + " in /opt/layered\nREADME\n" + testimages.LayeredHello + testimages.LayeredHello +
		"640 1000:1000 1\n644 0:0 2\n" + testimages.LayeredGreeting + "/mine\n"
	if got != want {
		t.Errorf("with args: got\n%s\nwant\n%s", got, want)
	}
	// A command replaces the entrypoint and drops the cmd; the container's
	// env and working dir win over the image's.
	got = h.runImage(sb, sbCfg, "command", "layered:1", func(c *runtimeapi.ContainerConfig) {
		c.Command = []string{"sh", "-c", `echo "$LAYERED_GREETING in $(pwd)"; ls /home`}
		c.WorkingDir = "/var"
		c.Envs = []*runtimeapi.KeyValue{{Key: "LAYERED_GREETING", Value: []byte("overridden")}}
	})
	if want := "overridden in /var\njetlet\n"; got != want {
		t.Errorf("with a command: got %q, want %q", got, want)
	}
}

// The image's USER is resolved in its own /etc/passwd and /etc/group, and
// HOME is that user's; run_as_user wins over it.
func TestAContainerRunsAsItsImagesUser(t *testing.T) {
	h := newHarness(t)
	requireImages(t, h)
	sb, sbCfg := h.pod("p", nil)
	script := []string{"sh", "-c", `echo "$(id -u):$(id -g) $HOME $(pwd) $(stat -c %a /)"`}
	got := h.runImage(sb, sbCfg, "image-user", "nonroot:1", func(c *runtimeapi.ContainerConfig) { c.Command = script })
	if want := "1000:1000 /home/jetlet /home/jetlet 755\n"; got != want {
		t.Errorf("as the image's user: %q, want %q", got, want)
	}
	got = h.runImage(sb, sbCfg, "run-as", "nonroot:1", func(c *runtimeapi.ContainerConfig) {
		c.Command = script
		c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{RunAsUser: &runtimeapi.Int64Value{Value: 65534}}}
	})
	if want := "65534:65534 /home /home/jetlet 755\n"; got != want {
		t.Errorf("run_as_user 65534: %q, want %q", got, want)
	}
	st, err := h.is.ImageStatus(ctxT(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "nonroot:1"}})
	if err != nil || st.GetImage().GetUsername() != "jetlet" {
		t.Errorf("ImageStatus of nonroot: %v, %v; want username jetlet", st, err)
	}
}

// A container sees nothing of its node: not the data dir, not the host's
// files, only its image and what the runtime adds.
func TestAContainerSeesOnlyItsImage(t *testing.T) {
	h := newHarness(t)
	requireImages(t, h)
	sb, sbCfg := h.pod("p", nil)
	got := h.runImage(sb, sbCfg, "look", testImage, func(c *runtimeapi.ContainerConfig) {
		c.Command = []string{"sh", "-c", "ls -d " + h.rt.cfg.Dir + " /etc/shadow /usr/lib /var/lib 2>&1; ls /etc"}
	})
	for _, p := range []string{h.rt.cfg.Dir, "/etc/shadow", "/usr/lib", "/var/lib"} {
		if !strings.Contains(got, "ls: "+p+": No such file or directory") {
			t.Errorf("the container sees %s:\n%s", p, got)
		}
	}
	if !strings.Contains(got, "group\nhostname\nhosts\npasswd\nresolv.conf\n") {
		t.Errorf("/etc is not the image's and the pod's files:\n%s", got)
	}
}

func TestPullErrors(t *testing.T) {
	h := newHarness(t)
	requireImages(t, h)
	if _, err := h.pull(h.registry+"/jetlet-test/never-pushed:1", nil); status.Code(err) != codes.NotFound {
		t.Errorf("a missing image: %v, want NotFound", err)
	}
	if _, err := h.pull("Not A Reference", nil); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an invalid reference: %v, want InvalidArgument", err)
	}
	private := testimages.Serve(t, map[string]v1.Image{"team/app:1": testimages.Must(t, testimages.Busybox)}, testimages.WithBasicAuth("puller", "s3cret"))
	ref := private + "/team/app:1"
	if _, err := h.pull(ref, nil); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a private image without credentials: %v, want PermissionDenied", err)
	}
	_, err := h.pull(ref, &runtimeapi.AuthConfig{Username: "puller", Password: "wrong"})
	if status.Code(err) != codes.PermissionDenied || strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong credentials: %v, want PermissionDenied without the password", err)
	}
	if _, err := h.pull(ref, &runtimeapi.AuthConfig{Username: "puller", Password: "s3cret"}); err != nil {
		t.Errorf("with its credentials: %v", err)
	}
}

// Concurrent RemoveImage calls of one image all succeed (critest's "should
// not fail on simultaneous RemoveImage calls"): the ones that lose the race
// find the image gone, which is what they asked for.
func TestConcurrentRemoveImage(t *testing.T) {
	h := newHarness(t)
	requireImages(t, h)
	const rounds, callers = 20, 8
	for range rounds {
		id, err := h.pull("layered:1", nil)
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		errs := make(chan error, callers)
		for range callers {
			go func() {
				<-start
				_, err := h.is.RemoveImage(ctxT(t), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: id}})
				errs <- err
			}()
		}
		close(start)
		for range callers {
			if err := <-errs; err != nil {
				t.Fatalf("a concurrent RemoveImage: %v", err)
			}
		}
		if st, err := h.is.ImageStatus(ctxT(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: id}}); err != nil || st.GetImage() != nil {
			t.Fatalf("the removed image's status: %v, %v", st, err)
		}
	}
}

// An image removed while a container uses it stays on disk until the
// container goes: the container still starts.
func TestRemoveAnImageInUse(t *testing.T) {
	h := newHarness(t)
	requireImages(t, h)
	sb, sbCfg := h.pod("p", nil)
	id, err := h.pull("layered:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := containerConfig("c", nil, "cat", "/opt/layered/hello.txt")
	cfg.Image.Image = "layered:1"
	c := h.create(sb, sbCfg, cfg)
	if _, err := h.is.RemoveImage(ctxT(t), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: id}}); err != nil {
		t.Fatal(err)
	}
	if st, err := h.is.ImageStatus(ctxT(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: id}}); err != nil || st.GetImage() != nil {
		t.Fatalf("the removed image's status: %v, %v", st, err)
	}
	h.startC(c)
	st := h.waitState(c, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.GetExitCode() != 0 {
		t.Fatalf("the container of a removed image exited %d: %s", st.GetExitCode(), st.GetMessage())
	}
	if lines := h.waitLog(st.GetLogPath(), strings.TrimSpace(testimages.LayeredHello)); len(lines) != 1 {
		t.Fatalf("log %q", lines)
	}
	layers := h.rt.store.LayerDirs(h.rt.containers[c].images.Root)
	if _, err := h.rs.RemoveContainer(ctxT(t), &runtimeapi.RemoveContainerRequest{ContainerId: c}); err != nil {
		t.Fatal(err)
	}
	top := layers[0] // layered's own layer: no other image holds it
	if _, err := os.Stat(top); !os.IsNotExist(err) {
		t.Errorf("the layer %s of the removed image outlived its last container: %v", top, err)
	}
}

// An image volume is an image's tree, or a sub path of it, read only.
func TestImageVolume(t *testing.T) {
	h := newHarness(t)
	requireImages(t, h)
	sb, sbCfg := h.pod("p", nil)
	if _, err := h.pull("layered:1", nil); err != nil {
		t.Fatal(err)
	}
	got := h.runImage(sb, sbCfg, "volume", testImage, func(c *runtimeapi.ContainerConfig) {
		c.Command = []string{"sh", "-c", "cat /image/opt/layered/hello.txt /sub/hello.txt; touch /sub/x 2>&1; true"}
		c.Mounts = []*runtimeapi.Mount{
			{ContainerPath: "/image", Image: &runtimeapi.ImageSpec{Image: "layered:1"}, Readonly: true},
			{ContainerPath: "/sub", Image: &runtimeapi.ImageSpec{Image: "layered:1"}, ImageSubPath: "opt/layered", Readonly: true},
		}
	})
	want := testimages.LayeredHello + testimages.LayeredHello + "touch: /sub/x: Read-only file system\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// ImportImages loads an OCI layout (what `jetlet image import` sends) with
// no registry; the imported image runs.
func TestImportImages(t *testing.T) {
	h := newHarness(t)
	requireImages(t, h)
	var archive bytes.Buffer
	if err := testimages.WriteOCILayout(&archive, map[string]v1.Image{"example.invalid/air/gapped:1": testimages.Must(t, testimages.Layered)}); err != nil {
		t.Fatal(err)
	}
	imported, err := h.rt.ImportImages(context.Background(), &archive)
	if err != nil || len(imported) != 1 || imported[0].RepoTags[0] != "example.invalid/air/gapped:1" {
		t.Fatalf("imported %v, %v", imported, err)
	}
	sb, sbCfg := h.pod("p", nil)
	cfg := containerConfig("c", nil)
	cfg.Image.Image = "example.invalid/air/gapped:1"
	resp, err := h.rs.CreateContainer(ctxT(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: sbCfg})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.GetContainerId()
	h.startC(id)
	st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if lines := h.waitLog(st.GetLogPath(), strings.TrimSpace(testimages.LayeredHello)); len(lines) != 2 {
		t.Fatalf("log %q", lines)
	}
	fs, err := h.is.ImageFsInfo(ctxT(t), &runtimeapi.ImageFsInfoRequest{})
	if err != nil || fs.GetImageFilesystems()[0].GetUsedBytes().GetValue() == 0 || fs.GetImageFilesystems()[0].GetInodesUsed().GetValue() == 0 {
		t.Errorf("ImageFsInfo %v, %v: want the store's bytes and inodes", fs, err)
	}
	// One file system for the store and the containers: one reported for both.
	if c := fs.GetContainerFilesystems(); len(c) != 1 || c[0].GetFsId().GetMountpoint() != fs.GetImageFilesystems()[0].GetFsId().GetMountpoint() {
		t.Errorf("ImageFsInfo container file systems %v, want the image file system", c)
	}
}

// An image volume that is not read only, or whose sub path the image lacks,
// is refused at create; ContainerStatus names the image a volume mounts.
func TestImageVolumeRefusalsAndStatus(t *testing.T) {
	h := newHarness(t)
	requireImages(t, h)
	sb, sbCfg := h.pod("p", nil)
	id, err := h.pull("layered:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	volume := func(name string, m *runtimeapi.Mount) *runtimeapi.ContainerConfig {
		c := containerConfig(name, nil, "true")
		m.ContainerPath, m.Image = "/image", &runtimeapi.ImageSpec{Image: "layered:1"}
		c.Mounts = []*runtimeapi.Mount{m}
		return c
	}
	for name, m := range map[string]*runtimeapi.Mount{
		"read-write":       {},
		"missing-sub-path": {Readonly: true, ImageSubPath: "no/such/dir"},
	} {
		if _, err := h.tryCreate(sb, sbCfg, volume(name, m)); status.Code(err) == codes.OK {
			t.Errorf("an image volume %s was created", name)
		}
	}
	c := h.create(sb, sbCfg, volume("ok", &runtimeapi.Mount{Readonly: true, ImageSubPath: "opt/layered"}))
	var ref string
	for _, m := range h.status(c).GetMounts() {
		if m.GetContainerPath() == "/image" {
			ref = m.GetImage().GetImageRef()
		}
	}
	if ref != id {
		t.Errorf("the image volume's image_ref is %q, want %s", ref, id)
	}
}

// Where overlayfs cannot stack images (copyRoots, found by Start), a
// container's root is a copy of its image and runs as the image says.
func TestAContainerRunsACopyOfItsImage(t *testing.T) {
	h := newHarness(t)
	requireImages(t, h)
	h.rt.copyRoots = true // before any call: the calls' goroutines see it
	sb, sbCfg := h.pod("p", nil)
	if got := h.runImage(sb, sbCfg, "copied", "layered:1", nil); got != testimages.LayeredOutput {
		t.Errorf("the copied image printed %q, want %q", got, testimages.LayeredOutput)
	}
}
