package embedded

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/kernel"
)

// testUsernsBase is the first host id of the test pods' user namespace.
const testUsernsBase = 1 << 29

func podUsernsOptions(base uint32) *runtimeapi.UserNamespace {
	m := []*runtimeapi.IDMapping{{ContainerId: 0, HostId: base, Length: 65536}}
	return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: m, Gids: m}
}

// usernsPod runs a sandbox with its own user namespace of 65536 ids from
// base.
func (h *harness) usernsPod(name string, base uint32) (string, *runtimeapi.PodSandboxConfig) {
	h.t.Helper()
	cfg := podConfig(name, nil)
	cfg.LogDirectory = filepath.Join(h.logs, name)
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{UsernsOptions: podUsernsOptions(base)},
	}}
	resp, err := h.rs.RunPodSandbox(ctxT(h.t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		h.t.Fatalf("RunPodSandbox: %v", err)
	}
	return resp.GetPodSandboxId(), cfg
}

func inPodUserns(c *runtimeapi.ContainerConfig, sbCfg *runtimeapi.PodSandboxConfig) {
	c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: sbCfg.GetLinux().GetSecurityContext().GetNamespaceOptions(),
	}}
}

func requireUserns(t *testing.T, h *harness) {
	t.Helper()
	requireImages(t, h)
	if h.rt.usernsOff != nil {
		t.Skipf("no user namespaces here: %v", h.rt.usernsOff)
	}
}

// Root in a pod with a user namespace is the first id of the pod's range on
// the host, never the host's root: its process's uid_map says so, and what
// it writes in its root is owned by that id on the host. Its image and its
// volumes appear owned as on the host (idmapped mounts), and what it writes
// in a volume is owned on the host by the uid it has in the pod, as
// containerd does it. Its /dev/shm, a tmpfs, is its root's on the host (a
// tmpfs takes no idmap before Linux 6.3). An exec joins the namespace.
func TestAPodInAUserNamespace(t *testing.T) {
	h := newHarness(t)
	requireUserns(t, h)
	st, err := h.rs.Status(ctxT(t), &runtimeapi.StatusRequest{})
	if err != nil || !st.GetRuntimeHandlers()[0].GetFeatures().GetUserNamespaces() {
		t.Fatalf("Status does not report user namespaces: %v, %v", st, err)
	}
	sb, sbCfg := h.usernsPod("userns", testUsernsBase)
	volume := filepath.Join(h.dir, "volume") // as kubelet makes an emptyDir
	if err := os.Mkdir(volume, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(volume, 0o777); err != nil {
		t.Fatal(err)
	}
	cfg := containerConfig("c", nil, "sh", "-c",
		`echo "uid $(id -u) image $(stat -c %u /etc/passwd) volume $(stat -c %u /data) shm $(stat -c %u /dev/shm)"; touch /in-root /dev/shm/f; echo hi > /data/f; stat -c "wrote %u" /data/f; echo ready; exec sleep 1000`)
	inPodUserns(cfg, sbCfg)
	cfg.Mounts = []*runtimeapi.Mount{{HostPath: volume, ContainerPath: "/data"}}
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)
	lines := h.waitLog(filepath.Join(h.logs, "userns", "c.log"), "ready")
	out := strings.Join(lines, "\n")
	for _, want := range []string{"uid 0 image 0 volume 0 shm 0", "wrote 0"} {
		if !strings.Contains(out, want) {
			t.Errorf("the container printed\n%s\nwant %q", out, want)
		}
	}

	pid := h.pid(id)
	uidMap, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", pid))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(uidMap)); strings.Join(got, " ") != fmt.Sprintf("0 %d 65536", testUsernsBase) {
		t.Errorf("the container's uid_map is %q, want 0 mapped to %d", uidMap, testUsernsBase)
	}
	var proc unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d", pid), &proc); err != nil || proc.Uid != testUsernsBase {
		t.Errorf("the container's process runs as host uid %d (%v), want %d", proc.Uid, err, testUsernsBase)
	}
	for path, want := range map[string]uint32{
		filepath.Join(h.rt.containerDir(id), "upper", "in-root"): testUsernsBase,
		filepath.Join(volume, "f"):                               0,
		filepath.Join(h.rt.sandboxDir(sb), "shm", "f"):           testUsernsBase,
	} {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil || st.Uid != want {
			t.Errorf("%s is owned by host uid %d (%v), want %d", path, st.Uid, err, want)
		}
	}

	exec, err := h.rs.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: []string{"sh", "-c", "id -u; cat /proc/self/uid_map"}, Timeout: 30})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(exec.GetStdout())); strings.Join(got, " ") != fmt.Sprintf("0 0 %d 65536", testUsernsBase) {
		t.Errorf("an exec printed %q (%s), want root of the pod's namespace", exec.GetStdout(), exec.GetStderr())
	}
}

// The pod's UTS namespace is made in its user namespace: root in the pod
// with CAP_SYS_ADMIN (in the pod's namespace, nothing on the host) names it.
func TestAPodInAUserNamespaceOwnsItsUTSNamespace(t *testing.T) {
	h := newHarness(t)
	requireUserns(t, h)
	sb, sbCfg := h.usernsPod("uts", testUsernsBase)
	got := h.runImage(sb, sbCfg, "rename", testImage, func(c *runtimeapi.ContainerConfig) {
		c.Command = []string{"sh", "-c", "hostname renamed && hostname"}
		inPodUserns(c, sbCfg)
		c.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{AddCapabilities: []string{"SYS_ADMIN"}}
	})
	if got != "renamed\n" {
		t.Errorf("the pod's root renaming its pod printed %q", got)
	}
	if name, _ := os.Hostname(); name == "renamed" {
		t.Errorf("the host was renamed")
	}
}

// In a user namespace the masked paths are the config's only: none is
// procMount Unmasked, which kubelet allows only there.
func TestUnmaskedProcInAUserNamespace(t *testing.T) {
	h := newHarness(t)
	requireUserns(t, h)
	sb, sbCfg := h.usernsPod("unmasked", testUsernsBase)
	for name, masked := range map[string][]string{"masked": {"/proc/keys"}, "unmasked": nil} {
		got := h.runImage(sb, sbCfg, name, testImage, func(c *runtimeapi.ContainerConfig) {
			c.Command = []string{"stat", "-c", "%F", "/proc/keys"}
			inPodUserns(c, sbCfg)
			c.Linux.SecurityContext.MaskedPaths = masked
		})
		want := "regular empty file\n" // proc sizes its files 0
		if masked != nil {
			want = "character special file\n"
		}
		if got != want {
			t.Errorf("%s: /proc/keys is a %q, want %q", name, got, want)
		}
	}
}

// A volume on a tmpfs (a secret's, a Memory emptyDir's) is idmapped into a
// pod's user namespace where the kernel can (Linux 6.3); before, its
// container does not start, with a message that says why, as on containerd.
func TestATmpfsVolumeInAUserNamespace(t *testing.T) {
	h := newHarness(t)
	requireUserns(t, h)
	volume := filepath.Join(h.dir, "tmpfs")
	if err := os.Mkdir(volume, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", volume, "tmpfs", 0, "mode=755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(volume, unix.MNT_DETACH) })
	sb, sbCfg := h.usernsPod("tmpfs", testUsernsBase)
	cfg := containerConfig("c", nil, "sh", "-c", `echo "volume $(stat -c %u /data)"; exec sleep 1000`)
	inPodUserns(cfg, sbCfg)
	cfg.Mounts = []*runtimeapi.Mount{{HostPath: volume, ContainerPath: "/data"}}
	id := h.create(sb, sbCfg, cfg)
	_, err := h.rs.StartContainer(ctxT(t), &runtimeapi.StartContainerRequest{ContainerId: id})
	if kernel.AtLeast(6, 3) {
		if err != nil {
			t.Fatalf("StartContainer on Linux %s: %v", kernel.Release(), err)
		}
		h.waitLog(filepath.Join(h.logs, "tmpfs", "c.log"), "volume 0")
		return
	}
	if err == nil || !strings.Contains(err.Error(), volume+" is a tmpfs, which this kernel (Linux "+kernel.Release()+") cannot idmap") {
		t.Errorf("StartContainer on Linux %s: %v, want it refused: a tmpfs it cannot idmap", kernel.Release(), err)
	}
}

func TestUserNamespaceRefusals(t *testing.T) {
	h := newHarness(t)
	requireUserns(t, h)
	noRoot := []*runtimeapi.IDMapping{{ContainerId: 1, HostId: testUsernsBase, Length: 65536}}
	two := []*runtimeapi.IDMapping{{HostId: testUsernsBase, Length: 65536}, {HostId: testUsernsBase + 65536, Length: 65536}}
	for name, ns := range map[string]*runtimeapi.UserNamespace{
		"mode CONTAINER":   {Mode: runtimeapi.NamespaceMode_CONTAINER},
		"mode TARGET":      {Mode: runtimeapi.NamespaceMode_TARGET},
		"no mappings":      {Mode: runtimeapi.NamespaceMode_POD},
		"root not mapped":  {Mode: runtimeapi.NamespaceMode_POD, Uids: noRoot, Gids: noRoot},
		"two mappings":     {Mode: runtimeapi.NamespaceMode_POD, Uids: two, Gids: two},
		"past the last id": {Mode: runtimeapi.NamespaceMode_POD, Uids: []*runtimeapi.IDMapping{{HostId: 1<<32 - 10, Length: 65536}}, Gids: noRoot},
	} {
		cfg := podConfig("bad", nil)
		cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{UsernsOptions: ns},
		}}
		_, err := h.rs.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}

	sb, sbCfg := h.usernsPod("mismatch", testUsernsBase)
	c := containerConfig("other-range", nil, "true")
	c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{UsernsOptions: podUsernsOptions(testUsernsBase + 65536)},
	}}
	_, err := h.tryCreate(sb, sbCfg, c)
	wantCode(t, err, codes.InvalidArgument)
}

// With a network of its own (CNI), a pod in a user namespace has it made in
// that namespace: its root binds a port below 1024, as on containerd.
func TestAPodInAUserNamespaceOwnsItsNetwork(t *testing.T) {
	h, _ := cniHarness(t)
	requireUserns(t, h)
	sb, sbCfg := h.usernsPod("net", testUsernsBase)
	got := h.runImage(sb, sbCfg, "bind", testImage, func(c *runtimeapi.ContainerConfig) {
		c.Command = []string{"sh", "-c", "httpd -p 80 2>&1 && echo bound && killall httpd; true"}
		inPodUserns(c, sbCfg)
	})
	if got != "bound\n" {
		t.Errorf("the pod's root binding port 80 printed %q", got)
	}
}
