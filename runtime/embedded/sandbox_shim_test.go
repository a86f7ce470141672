package embedded

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podWith runs a sandbox with cfg's extras (hostname, DNS, sysctls, namespace
// options) and returns its id and config.
func (h *harness) podWith(name string, adjust func(*runtimeapi.PodSandboxConfig)) (string, *runtimeapi.PodSandboxConfig) {
	h.t.Helper()
	cfg := podConfig(name, nil)
	cfg.LogDirectory = filepath.Join(h.logs, name)
	adjust(cfg)
	resp, err := h.rs.RunPodSandbox(ctxT(h.t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		h.t.Fatalf("RunPodSandbox: %v", err)
	}
	return resp.GetPodSandboxId(), cfg
}

// output runs a container printing what script prints and returns it.
func (h *harness) output(sb string, sbCfg *runtimeapi.PodSandboxConfig, name, script string) string {
	h.t.Helper()
	return h.outputWith(sb, sbCfg, name, script, nil)
}

// outputWith is output with the container's config adjusted first.
func (h *harness) outputWith(sb string, sbCfg *runtimeapi.PodSandboxConfig, name, script string, adjust func(*runtimeapi.ContainerConfig)) string {
	h.t.Helper()
	cfg := containerConfig(name, nil, "sh", "-c", script+"; echo END")
	if adjust != nil {
		adjust(cfg)
	}
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)
	st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	lines := h.waitLog(st.GetLogPath(), "END")
	var out []string
	for _, l := range lines {
		if _, content, ok := strings.Cut(l, " stdout F "); ok && content != "END" {
			out = append(out, content)
		}
	}
	return strings.Join(out, "\n")
}

func requireIsolation(t *testing.T, h *harness) {
	t.Helper()
	if level, missing := h.rt.Isolation(); level != IsolationFull {
		t.Skipf("isolation %s: %v", level, missing)
	}
}

func TestPodHostnameDNSAndSysctls(t *testing.T) {
	h := newHarness(t)
	requireIsolation(t, h)
	hostHostname, _ := os.Hostname()
	hostShm, _ := os.ReadFile("/proc/sys/kernel/shm_rmid_forced")
	sb, sbCfg := h.podWith("p", func(c *runtimeapi.PodSandboxConfig) {
		c.Hostname = "podhost"
		c.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: []string{"ns.svc.cluster.local"}, Options: []string{"ndots:5"}}
		c.Linux = &runtimeapi.LinuxPodSandboxConfig{Sysctls: map[string]string{"kernel.shm_rmid_forced": "1"}}
	})
	got := h.output(sb, sbCfg, "c", "hostname; cat /etc/hostname; cat /etc/resolv.conf; cat /proc/sys/kernel/shm_rmid_forced")
	want := "podhost\npodhost\nnameserver 10.0.0.10\nsearch ns.svc.cluster.local\noptions ndots:5\n1"
	if got != want {
		t.Fatalf("the pod saw\n%s\nwant\n%s", got, want)
	}
	if now, _ := os.Hostname(); now != hostHostname {
		t.Fatalf("the host's name changed to %q", now)
	}
	if now, _ := os.ReadFile("/proc/sys/kernel/shm_rmid_forced"); string(now) != string(hostShm) {
		t.Fatalf("the host's kernel.shm_rmid_forced changed to %q", now)
	}
}

func TestSysctlsThePodDoesNotScopeAreRefused(t *testing.T) {
	h := newHarness(t)
	requireIsolation(t, h)
	for name, sysctl := range map[string]string{
		"host IPC":       "kernel.shm_rmid_forced",
		"not namespaced": "vm.swappiness",
		"host network":   "net.ipv4.ip_forward",
	} {
		t.Run(name, func(t *testing.T) {
			cfg := podConfig("p-"+strings.ReplaceAll(name, " ", "-"), nil)
			cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{
				Sysctls: map[string]string{sysctl: "1"},
				SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{
					Ipc: runtimeapi.NamespaceMode_NODE, Network: runtimeapi.NamespaceMode_NODE}},
			}
			_, err := h.rs.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
			if err == nil || !strings.Contains(err.Error(), sysctl) {
				t.Fatalf("RunPodSandbox with %s = %v, want an error naming it", sysctl, err)
			}
		})
	}
}

func TestContainersOfAPodShareShmButNotTmp(t *testing.T) {
	h := newHarness(t)
	requireIsolation(t, h)
	sb, sbCfg := h.pod("p", nil)
	marker := filepath.Join(h.shared, "first-ready")
	h.run(sb, sbCfg, "first", "sh", "-c", "echo mine > /tmp/mark; touch /dev/shm/pod-shm; touch "+marker+"; exec sleep 1000")
	eventually(t, "first container ready", func() bool { _, err := os.Stat(marker); return err == nil })
	got := h.output(sb, sbCfg, "second", "ls /dev/shm; test -e /tmp/mark && echo sees-tmp || echo own-tmp")
	lines := strings.Split(got, "\n")
	if len(lines) < 2 || lines[0] != "pod-shm" || lines[1] != "own-tmp" {
		t.Fatalf("second container saw %q: want the pod's /dev/shm and its own /tmp", got)
	}
	if _, err := os.Stat("/dev/shm/pod-shm"); err == nil {
		t.Fatal("the pod's shared memory reached the host's /dev/shm")
	}
}

// The pause of a pod whose containers share a pid namespace is its shim's:
// a restart of the runtime leaves both to the pod, its stop ends both, and
// a pause that dies takes the pod's processes and its shim along, which
// marks the sandbox NOTREADY (kubelet then makes it anew, as for a dead
// pause container).
func TestAPodsPauseLivesAndEndsWithItsShim(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("paused", nil)
	sleeper := h.run(sb, sbCfg, "sleeper", "sleep", "1000")
	pause := h.pausePID(sb)

	h.restart()

	if got := h.pausePID(sb); got != pause {
		t.Fatalf("pause pid %d after a restart, was %d", got, pause)
	}
	resp, err := h.rs.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: sleeper, Timeout: 30, Cmd: []string{"cat", "/proc/1/comm"}})
	if err != nil || string(resp.GetStdout()) != "pause\n" {
		t.Fatalf("PID 1 after a restart: %q, %v", resp.GetStdout(), err)
	}
	if _, err := h.rs.StopPodSandbox(ctxT(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pause ends with its pod", func() bool { return !processAlive(pause) })

	sb, sbCfg = h.pod("unpaused", nil)
	sleeper = h.run(sb, sbCfg, "sleeper", "sleep", "1000")
	sleeperPID := h.pid(sleeper)
	if err := syscall.Kill(h.pausePID(sb), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod's processes end with its pause", func() bool { return !processAlive(sleeperPID) })
	eventually(t, "the sandbox is not ready once its pause ended", func() bool {
		st, err := h.rs.PodSandboxStatus(ctxT(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb})
		return err == nil && st.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	})
}

// pausePID is the host pid of the pause of sandbox sb: its shim's child
// named pause.
func (h *harness) pausePID(sb string) int {
	h.t.Helper()
	shim := h.shimPID(sb)
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", shim))
	for _, f := range tasks {
		data, _ := os.ReadFile(f)
		for _, pid := range strings.Fields(string(data)) {
			if comm, _ := os.ReadFile("/proc/" + pid + "/comm"); string(comm) == "pause\n" {
				n, _ := strconv.Atoi(pid)
				return n
			}
		}
	}
	h.t.Fatalf("sandbox %s: no pause among the children of its shim (pid %d)", sb, shim)
	return 0
}

// A SIGTERM to a pod's shim is the host stopping the pod (systemd stopping
// its scope at a shutdown, which signals the containers too): the shim
// keeps serving while a container runs, refuses to start another, and ends
// once the last has exited and its exit is recorded; a shim with no
// container running ends at once.
func TestAPodShimEndsWithItsContainersAfterSIGTERM(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("terminated", nil)
	sleeper := h.run(sb, sbCfg, "sleeper", "sleep", "1000")
	shim := h.shimPID(sb)
	if err := syscall.Kill(shim, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	resp, err := h.rs.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: sleeper, Timeout: 30, Cmd: []string{"true"}})
	if err != nil || resp.GetExitCode() != 0 {
		t.Fatalf("exec in the running container after the shim's SIGTERM: %v, %v", resp, err)
	}
	second := h.create(sb, sbCfg, containerConfig("second", nil, "sleep", "1000"))
	if _, err := h.rs.StartContainer(ctxT(t), &runtimeapi.StartContainerRequest{ContainerId: second}); err == nil || !strings.Contains(err.Error(), "stopping") {
		t.Fatalf("a start after the shim's SIGTERM: %v, want it refused", err)
	}
	if !processAlive(shim) {
		t.Fatal("the shim ended while its container ran")
	}
	if err := syscall.Kill(h.pid(sleeper), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the shim ends with its last container", func() bool { return !processAlive(shim) })
	st := h.waitState(sleeper, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.GetExitCode() != 137 {
		t.Fatalf("the container after its shim ended: %v; want its exit recorded: 137, not lost", st)
	}

	idle, _ := h.pod("idle", nil)
	shim = h.shimPID(idle)
	if err := syscall.Kill(shim, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a shim with no container running ends on SIGTERM", func() bool { return !processAlive(shim) })
}

// shimPID is the host pid of sandbox sb's pod shim.
func (h *harness) shimPID(sb string) int {
	h.t.Helper()
	s, err := h.rt.getSandbox(sb)
	if err != nil {
		h.t.Fatal(err)
	}
	return s.shimPID
}
