package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/leftovers"
	"github.com/jetlet/jetlet/test/testimages"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const testImage = "busybox"

// harness is a Runtime serving on a unix socket and a gRPC client for it.
type harness struct {
	t    testing.TB
	dir  string // short: the socket lives in it (108-byte sun_path limit)
	sock string
	logs string
	// shared is a directory every container the harness creates sees at the
	// same path (a volume): where tests and containers exchange files, since a
	// container's /tmp is its own.
	shared string
	rt     *Runtime
	conn   *grpc.ClientConn
	rs     runtimeapi.RuntimeServiceClient
	is     runtimeapi.ImageServiceClient
	// registry serves the images the tests pull (testRegistry), the
	// runtime's mirror.
	registry string
	// configure, when set, adjusts the Config of every start.
	configure func(*Config)
	// bridge and cidr are the pod network's (PodBridge, PodCIDR): the
	// harness's own, so that tests of several processes never share one.
	bridge, cidr string
}

func newHarness(t testing.TB) *harness { return newHarnessWith(t, nil) }

// newHostProgramsHarness is a harness whose runtime runs host programs
// (Config.HostPrograms), as one that is not root does.
func newHostProgramsHarness(t testing.TB) *harness {
	return newHarnessWith(t, func(c *Config) { c.HostPrograms = true })
}

func newHarnessWith(t testing.TB, configure func(*Config)) *harness {
	t.Helper()
	dir, err := os.MkdirTemp("", "jp")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dir: dir, sock: filepath.Join(dir, "cri.sock"), logs: filepath.Join(dir, "logs"),
		shared: filepath.Join(dir, "shared"), configure: configure, registry: testRegistry(t)}
	h.bridge, h.cidr = cnitest.Bridge(t)
	if err := os.Mkdir(h.shared, 0o777); err != nil {
		t.Fatal(err)
	}
	h.start()
	t.Cleanup(func() {
		h.cleanup()
		_ = os.RemoveAll(dir)
	})
	return h
}

func (h *harness) start() {
	h.t.Helper()
	cfg := Config{Dir: filepath.Join(h.dir, "state"), ShimPath: gobuild.Shim.Path(h.t), Logger: zerolog.New(zerolog.NewTestWriter(h.t)).Level(zerolog.InfoLevel),
		ImageMirror: h.registry, PodBridge: h.bridge, PodCIDR: h.cidr}
	if h.configure != nil {
		h.configure(&cfg)
	}
	rt, err := New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := rt.Start(context.Background(), h.sock); err != nil {
		h.t.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+h.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		h.t.Fatal(err)
	}
	h.rt, h.conn = rt, conn
	h.rs = runtimeapi.NewRuntimeServiceClient(conn)
	h.is = runtimeapi.NewImageServiceClient(conn)
}

// testRegistry serves the busybox image (test/testimages) as docker.io's
// busybox:latest and busybox:1.36, for the harness's runtime to pull through
// as its mirror (Config.ImageMirror): the tests' pulls of "busybox" are real
// pulls, from this registry.
func testRegistry(t testing.TB) string {
	t.Helper()
	bb := testimages.Must(t, testimages.Busybox)
	noCommand, err := mutate.Config(bb, v1.Config{Env: []string{testimages.Path}})
	if err != nil {
		t.Fatal(err)
	}
	return testimages.Serve(t, map[string]v1.Image{
		"library/busybox:latest": bb, "library/busybox:1.36": bb, "library/no-command:1": noCommand,
		"library/layered:1": testimages.Must(t, testimages.Layered),
		"library/nonroot:1": testimages.Must(t, testimages.NonRoot),
	})
}

// noCommandImage is busybox without a Cmd or an Entrypoint (testRegistry).
const noCommandImage = "no-command:1"

func (h *harness) stop() {
	if h.conn != nil {
		h.conn.Close()
		h.conn = nil
	}
	if h.rt != nil {
		h.rt.Stop()
		h.rt = nil
	}
}

// restart stops serving (containers keep running) and starts a new Runtime on
// the same Dir and socket.
func (h *harness) restart() {
	h.t.Helper()
	h.stop()
	h.start()
}

// cleanup removes every sandbox and container, which kills their processes.
func (h *harness) cleanup() {
	if h.rt == nil {
		h.start()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if cs, err := h.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err == nil {
		for _, c := range cs.GetContainers() {
			if _, err := h.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.GetId()}); err != nil {
				h.t.Errorf("cleanup: remove container: %v", err)
			}
		}
	}
	if ps, err := h.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err == nil {
		for _, p := range ps.GetItems() {
			if _, err := h.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.GetId()}); err != nil {
				h.t.Errorf("cleanup: remove sandbox: %v", err)
			}
		}
	}
	h.stop()
	leftovers.KillShims(h.t, h.dir)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func podConfig(name string, labels map[string]string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: name + "-uid"},
		Labels:   labels,
	}
}

func (h *harness) pod(name string, labels map[string]string) (string, *runtimeapi.PodSandboxConfig) {
	h.t.Helper()
	cfg := podConfig(name, labels)
	cfg.LogDirectory = filepath.Join(h.logs, name)
	resp, err := h.rs.RunPodSandbox(ctxT(h.t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		h.t.Fatalf("RunPodSandbox: %v", err)
	}
	return resp.GetPodSandboxId(), cfg
}

func containerConfig(name string, labels map[string]string, cmd ...string) *runtimeapi.ContainerConfig {
	return &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: testImage},
		Command:  cmd,
		Labels:   labels,
		LogPath:  name + ".log",
	}
}

// create pulls the test image and creates a container in sandbox sb.
func (h *harness) create(sb string, sbCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) string {
	h.t.Helper()
	cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{HostPath: h.shared, ContainerPath: h.shared})
	id, err := h.tryCreate(sb, sbCfg, cfg)
	if err != nil {
		h.t.Fatalf("CreateContainer: %v", err)
	}
	return id
}

// tryCreate pulls cfg's image and creates the container as cfg says, for a
// test of what CreateContainer refuses.
func (h *harness) tryCreate(sb string, sbCfg *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) (string, error) {
	h.t.Helper()
	ctx := ctxT(h.t)
	if _, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: cfg.GetImage()}); err != nil {
		h.t.Fatalf("PullImage: %v", err)
	}
	resp, err := h.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: sbCfg})
	return resp.GetContainerId(), err
}

// run creates and starts a container running cmd in sandbox sb.
func (h *harness) run(sb string, sbCfg *runtimeapi.PodSandboxConfig, name string, cmd ...string) string {
	h.t.Helper()
	id := h.create(sb, sbCfg, containerConfig(name, nil, cmd...))
	h.startC(id)
	return id
}

func (h *harness) startC(id string) {
	h.t.Helper()
	if _, err := h.rs.StartContainer(ctxT(h.t), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		h.t.Fatalf("StartContainer: %v", err)
	}
}

func (h *harness) status(id string) *runtimeapi.ContainerStatus {
	h.t.Helper()
	resp, err := h.rs.ContainerStatus(ctxT(h.t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		h.t.Fatalf("ContainerStatus: %v", err)
	}
	return resp.GetStatus()
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) waitState(id string, want runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	h.t.Helper()
	var st *runtimeapi.ContainerStatus
	eventually(h.t, "container "+want.String(), func() bool {
		st = h.status(id)
		return st.GetState() == want
	})
	return st
}

// waitLog waits until the container's log holds a line containing substr and
// returns the log's lines.
func (h *harness) waitLog(path, substr string) []string {
	h.t.Helper()
	var lines []string
	eventually(h.t, "log line "+substr, func() bool {
		data, _ := os.ReadFile(path)
		lines = strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		return strings.Contains(string(data), substr)
	})
	return lines
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got error %v, want code %v", err, code)
	}
}

// pid is the container's process id, from the verbose status info.
func (h *harness) pid(id string) int {
	h.t.Helper()
	resp, err := h.rs.ContainerStatus(ctxT(h.t), &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		h.t.Fatal(err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil || info.PID == 0 {
		h.t.Fatalf("no pid in info %q: %v", resp.GetInfo()["info"], err)
	}
	return info.PID
}

func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	// A zombie is dead for our purposes.
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// hostLibraries are read-only volumes of the host's shared libraries at
// /lib and /lib64, for a container of the busybox image that runs the test
// binary, a dynamically linked host program.
func hostLibraries() []*runtimeapi.Mount {
	var mounts []*runtimeapi.Mount
	for _, dir := range []string{"/lib", "/lib64"} {
		if host, err := filepath.EvalSymlinks(dir); err == nil {
			mounts = append(mounts, &runtimeapi.Mount{ContainerPath: dir, HostPath: host, Readonly: true})
		}
	}
	return mounts
}
