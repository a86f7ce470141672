package embedded

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestRestartAdoptsRunningContainers(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", map[string]string{"app": "x"})
	cfg := containerConfig("survivor", map[string]string{"restart": "0"}, "sh", "-c", "trap 'exit 9' TERM; echo ready; while :; do sleep 0.05; done")
	cfg.Annotations = map[string]string{"io.kubernetes.container.hash": "h1"}
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)
	h.waitLog(h.status(id).GetLogPath(), "ready")
	pid := h.pid(id)

	h.restart()

	st := h.status(id)
	if st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || h.pid(id) != pid {
		t.Fatalf("after restart: %v", st)
	}
	if st.GetAnnotations()["io.kubernetes.container.hash"] != "h1" || st.GetLabels()["restart"] != "0" {
		t.Fatalf("labels/annotations lost: %v %v", st.GetLabels(), st.GetAnnotations())
	}
	ps, err := h.rs.PodSandboxStatus(ctxT(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
	if err != nil || ps.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || ps.GetStatus().GetLabels()["app"] != "x" {
		t.Fatalf("sandbox after restart: %v %v", ps, err)
	}
	// Names stay reserved across the restart.
	_, err = h.rs.CreateContainer(ctxT(t), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg})
	wantCode(t, err, codes.AlreadyExists)

	// The adopted container's later exit is seen with its real code.
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	st = h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.GetExitCode() != 9 || st.GetReason() != "Error" {
		t.Fatalf("exit %d reason %q, want 9 Error", st.GetExitCode(), st.GetReason())
	}
}

func TestExitWhileRuntimeDown(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	gate := filepath.Join(h.shared, "gate")
	id := h.run(sb, sbCfg, "c", "sh", "-c", "echo ready; while [ ! -e "+gate+" ]; do sleep 0.02; done; exit 5")
	stopped := h.run(sb, sbCfg, "s", "sleep", "1000")
	h.waitLog(h.status(id).GetLogPath(), "ready")
	pid := h.pid(id)

	h.stop()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "container process to exit while the runtime is down", func() bool { return !processAlive(pid) })
	h.start()

	st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.GetExitCode() != 5 || st.GetReason() != "Error" || st.GetFinishedAt() < st.GetStartedAt() {
		t.Fatalf("after restart: exit %d reason %q", st.GetExitCode(), st.GetReason())
	}
	// The other container is still running and can be stopped.
	if got := h.status(stopped).GetState(); got != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("other container: %v", got)
	}
	if _, err := h.rs.StopContainer(ctxT(t), &runtimeapi.StopContainerRequest{ContainerId: stopped, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	if st := h.status(stopped); st.GetExitCode() != 143 {
		t.Fatalf("stopped after restart: exit %d", st.GetExitCode())
	}
}

func TestShimKilledReportsUnknownExit(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	id := h.run(sb, sbCfg, "c", "sleep", "1000")
	pid := h.pid(id)
	var rec shim.State
	if err := atomicfile.ReadJSON(filepath.Join(h.rt.containerDir(id), "shim.json"), &rec); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(rec.ShimPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.GetExitCode() != 255 || st.GetReason() != "Unknown" || st.GetMessage() == "" {
		t.Fatalf("exit %d reason %q message %q", st.GetExitCode(), st.GetReason(), st.GetMessage())
	}
	eventually(t, "orphaned process killed", func() bool { return !processAlive(pid) })
}

func TestStopFindsAPodShimTheRuntimeDiedBeforeRecording(t *testing.T) {
	h := newHarness(t)
	sb, _ := h.pod("p", nil)
	h.rt.mu.RLock()
	dir := h.rt.sandboxes[sb].dir
	h.rt.mu.RUnlock()
	lock := filepath.Join(dir, "shim.lock")
	shimPID := shim.ShimPIDFromLock(lock)
	if !processAlive(shimPID) {
		t.Fatalf("pod shim pid %d from its lock: not alive", shimPID)
	}
	// As if the runtime had died between starting the shim and reading its
	// report: the record knows no shim pid.
	h.stop()
	var rec map[string]any
	if err := atomicfile.ReadJSON(filepath.Join(dir, "sandbox.json"), &rec); err != nil {
		t.Fatal(err)
	}
	delete(rec, "shim_pid")
	if err := atomicfile.WriteJSON(filepath.Join(dir, "sandbox.json"), rec); err != nil {
		t.Fatal(err)
	}
	h.start()
	if _, err := h.rs.StopPodSandbox(ctxT(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatalf("StopPodSandbox: %v", err)
	}
	if processAlive(shimPID) {
		t.Errorf("pod shim %d still alive after StopPodSandbox", shimPID)
	}
}

func TestCorruptRecordsAreSkipped(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	good := h.create(sb, sbCfg, containerConfig("good", nil, "true"))
	bad := h.create(sb, sbCfg, containerConfig("bad", nil, "true"))
	badSb, _ := h.pod("badpod", nil)
	if s, err := h.rt.getSandbox(badSb); err == nil && s.cgroup != nil {
		// Its record is corrupted below: no runtime can remove it then.
		t.Cleanup(func() { _ = s.cgroup.Delete(0) })
	}
	// Nor stop its shim: stopped first, as a crash could find it.
	if _, err := h.rs.StopPodSandbox(ctxT(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: badSb}); err != nil {
		t.Fatal(err)
	}
	h.stop()

	state := filepath.Join(h.dir, "state")
	mustWrite(t, filepath.Join(state, "containers", bad, "container.json"), `{"id": "`+bad+`", "config": {tru`)
	mustWrite(t, filepath.Join(state, "sandboxes", badSb, "sandbox.json"), "")
	mustWrite(t, filepath.Join(state, "images.json"), "[{")
	if err := os.MkdirAll(filepath.Join(state, "containers", "half-created"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.start()

	if st := h.status(good); st.GetState() != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("good container: %v", st)
	}
	_, err := h.rs.ContainerStatus(ctxT(t), &runtimeapi.ContainerStatusRequest{ContainerId: bad})
	wantCode(t, err, codes.NotFound)
	_, err = h.rs.PodSandboxStatus(ctxT(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: badSb})
	wantCode(t, err, codes.NotFound)
}

// A crash between a container's cgroup and its record leaves a directory
// and a cgroup that no record names: the next start removes both, and the
// pod's cgroup can then go with its sandbox.
func TestRestartRemovesWhatAnInterruptedCreateLeft(t *testing.T) {
	h := cgroupHarness(t)
	sb, _ := h.uniquePod("interrupted")
	s, err := h.rt.getSandbox(sb)
	if err != nil {
		t.Fatal(err)
	}
	mgr := h.rt.cgroups
	h.stop()
	id := strings.Repeat("ab", 32)
	orphan, err := mgr.Create(cgroups.Child(s.cgroup.Paths(), id), nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(h.dir, "state", "containers", id)
	if err := os.MkdirAll(filepath.Join(dir, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.start()

	for _, p := range orphan.ProcsFiles() {
		if _, err := os.Stat(filepath.Dir(p)); err == nil {
			t.Errorf("the interrupted container's cgroup %s is still there", filepath.Dir(p))
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("the interrupted container's directory is still there")
	}
	if _, err := h.rs.RemovePodSandbox(ctxT(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	for _, p := range s.cgroup.ProcsFiles() {
		if _, err := os.Stat(filepath.Dir(p)); err == nil {
			t.Errorf("the pod's cgroup %s is still there after its sandbox's removal", filepath.Dir(p))
		}
	}
}

func mustWrite(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A runtime that dies during StartContainer leaves a shim starting the
// process. The next runtime must see the container running (adopted), not
// created: a second start would run it twice.
func TestRestartDuringAStartAdoptsWhatTheShimStarted(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	id := h.create(sb, sbCfg, containerConfig("c", nil, "sleep", "1000"))

	// What StartContainer does up to launching the shim, and the launch,
	// with nobody left to read the shim's report.
	c, err := h.rt.getContainer(id)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := h.rt.buildSpec(c, h.rt.sandboxes[c.sandboxID])
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.WriteJSON(filepath.Join(c.dir, "spec.json"), spec); err != nil {
		t.Fatal(err)
	}
	sandboxDir := h.rt.sandboxDir(c.sandboxID)
	h.stop()
	// The request the dying runtime sent, answered to nobody, while the next
	// runtime starts.
	started := make(chan error, 1)
	go func() {
		_, err := shim.Call(context.Background(), sandboxDir, shim.Request{Op: shim.OpStart, Dir: c.dir})
		started <- err
	}()
	h.start()
	if err := <-started; err != nil {
		t.Fatal(err)
	}

	if st := h.status(id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || st.GetStartedAt() == 0 {
		t.Fatalf("after a restart during its start the container is %v, want RUNNING (adopted)", st.GetState())
	}
	_, err = h.rs.StartContainer(ctxT(t), &runtimeapi.StartContainerRequest{ContainerId: id})
	wantCode(t, err, codes.FailedPrecondition)
}
