package embedded

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
	"github.com/jetlet/jetlet/test/poll"
)

// cgroupHarness is a harness whose runtime makes cgroups; the test is
// skipped (saying why) where it cannot.
func cgroupHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	if ok, why := h.rt.cgroupsEnabled(); !ok {
		t.Skipf("no cgroups here: %s", why)
	}
	return h
}

// uniquePod runs a sandbox whose uid no other test binary on the host uses:
// pod cgroups are named after the uid, and packages run in parallel.
func (h *harness) uniquePod(name string) (string, *runtimeapi.PodSandboxConfig) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return h.pod(name+"-"+hex.EncodeToString(b[:]), nil)
}

// placeInCgroup writes the container's pid to its cgroup.procs files, as
// the pod shim does before the command runs. Until the pod shim lands, the
// per-container shim does not, so tests that need a process in the cgroup
// place it themselves.
func (h *harness) placeInCgroup(id string) {
	h.t.Helper()
	c, err := h.rt.getContainer(id)
	if err != nil {
		h.t.Fatal(err)
	}
	pid := strconv.Itoa(h.pid(id))
	for _, f := range h.rt.cgroupProcs(c) {
		if err := os.WriteFile(f, []byte(pid), 0); err != nil {
			h.t.Fatalf("place pid %s: %v", pid, err)
		}
	}
}

// memoryFile reads a file of the container's memory cgroup: v1name under
// cgroup v1, v2name under v2.
func (h *harness) memoryFile(id, v1name, v2name string) string {
	h.t.Helper()
	return h.cgroupFile(id, "/memory/", v1name, v2name)
}

// cpuFile reads a file of the container's cpu cgroup, as memoryFile.
func (h *harness) cpuFile(id, v1name, v2name string) string {
	h.t.Helper()
	return h.cgroupFile(id, "/cpu", v1name, v2name) // cpu, or cpu,cpuacct mounted together
}

// cgroupFile reads a file of the container's cgroup: under v1, v1name in
// the first hierarchy whose path holds v1dir.
func (h *harness) cgroupFile(id, v1dir, v1name, v2name string) string {
	h.t.Helper()
	return h.cgroupFileAbove(id, 0, v1dir, v1name, v2name)
}

// cgroupFileAbove is cgroupFile of the cgroup up levels above the
// container's (1: its pod cgroup).
func (h *harness) cgroupFileAbove(id string, up int, v1dir, v1name, v2name string) string {
	h.t.Helper()
	c, err := h.rt.getContainer(id)
	if err != nil {
		h.t.Fatal(err)
	}
	procs := h.rt.cgroupProcs(c)
	dir, name := filepath.Dir(procs[0]), v2name
	if h.rt.cgroups.Mode() == cgroups.V1 {
		name = v1name
		for _, f := range procs {
			if strings.Contains(f, v1dir) && !strings.Contains(f, "/cpuset/") {
				dir = filepath.Dir(f)
				break
			}
		}
	}
	for range up {
		dir = filepath.Dir(dir)
	}
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

func withMemoryLimit(cfg *runtimeapi.ContainerConfig, bytes int64) *runtimeapi.ContainerConfig {
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: bytes}}
	return cfg
}

func TestContainerAndPodStats(t *testing.T) {
	h := cgroupHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.uniquePod("stats")
	// Some CPU every 100 ms, and a child (memory) each time.
	id := h.create(sb, sbCfg, withMemoryLimit(containerConfig("busy", map[string]string{"app": "busy"},
		"/bin/sh", "-c", `while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 0.1; done`), 64<<20))
	h.startC(id)
	h.placeInCgroup(id)

	var st *runtimeapi.ContainerStats
	poll.Until(t, 30*time.Second, func() string { return "CPU and memory use of the container: " + st.String() }, func() bool {
		resp, err := h.rs.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: id})
		if err != nil {
			t.Fatalf("ContainerStats: %v", err)
		}
		st = resp.GetStats()
		return st.GetCpu().GetUsageCoreNanoSeconds().GetValue() > 0 && st.GetMemory().GetWorkingSetBytes().GetValue() > 0
	})
	if st.GetAttributes().GetId() != id || st.GetAttributes().GetLabels()["app"] != "busy" {
		t.Errorf("attributes = %v", st.GetAttributes())
	}
	if avail := st.GetMemory().GetAvailableBytes().GetValue(); avail == 0 || avail > 64<<20 {
		t.Errorf("available bytes under a 64 MiB limit = %d", avail)
	}
	// Under cgroup v2, a kernel with PSI has it for each cgroup.
	if _, err := os.Stat("/proc/pressure/cpu"); err == nil && h.rt.cgroups.Mode() == cgroups.V2 {
		if st.GetCpu().GetPsi().GetSome() == nil || st.GetMemory().GetPsi().GetSome() == nil || st.GetIo().GetPsi().GetSome() == nil {
			t.Errorf("no PSI under cgroup v2: cpu %v, memory %v, io %v", st.GetCpu().GetPsi(), st.GetMemory().GetPsi(), st.GetIo())
		}
	}

	for _, tc := range []struct {
		name   string
		filter *runtimeapi.ContainerStatsFilter
		want   int
	}{
		{"by sandbox", &runtimeapi.ContainerStatsFilter{PodSandboxId: sb}, 1},
		{"by id prefix", &runtimeapi.ContainerStatsFilter{Id: id[:13]}, 1},
		{"by label", &runtimeapi.ContainerStatsFilter{PodSandboxId: sb, LabelSelector: map[string]string{"app": "busy"}}, 1},
		{"other label", &runtimeapi.ContainerStatsFilter{PodSandboxId: sb, LabelSelector: map[string]string{"app": "idle"}}, 0},
	} {
		resp, err := h.rs.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: tc.filter})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(resp.GetStats()) != tc.want {
			t.Errorf("%s: %d stats, want %d", tc.name, len(resp.GetStats()), tc.want)
		}
	}

	ps, err := h.rs.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb})
	if err != nil {
		t.Fatal(err)
	}
	lin := ps.GetStats().GetLinux()
	if lin.GetCpu().GetUsageCoreNanoSeconds().GetValue() == 0 || lin.GetMemory().GetUsageBytes().GetValue() == 0 {
		t.Errorf("pod usage = %v %v, want the container's included", lin.GetCpu(), lin.GetMemory())
	}
	if lin.GetProcess().GetProcessCount().GetValue() == 0 {
		t.Errorf("pod process count = %v", lin.GetProcess())
	}
	if len(lin.GetContainers()) != 1 || lin.GetContainers()[0].GetAttributes().GetId() != id {
		t.Errorf("pod's container stats = %v", lin.GetContainers())
	}
	list, err := h.rs.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{Id: sb}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetStats()) != 1 || list.GetStats()[0].GetAttributes().GetId() != sb {
		t.Errorf("ListPodSandboxStats by id = %v", list.GetStats())
	}
}

func TestUpdateContainerResourcesLive(t *testing.T) {
	h := cgroupHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.uniquePod("update")
	id := h.create(sb, sbCfg, withMemoryLimit(containerConfig("c", nil, "sleep", "600"), 64<<20))
	if got := h.memoryFile(id, "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(64<<20) {
		t.Fatalf("memory limit at create = %s", got)
	}
	h.startC(id)
	if _, err := h.rs.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 128 << 20},
	}); err != nil {
		t.Fatal(err)
	}
	if got := h.memoryFile(id, "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(128<<20) {
		t.Errorf("memory limit after update = %s, want %d", got, 128<<20)
	}
	if got := h.status(id).GetResources().GetLinux().GetMemoryLimitInBytes(); got != 128<<20 {
		t.Errorf("ContainerStatus resources memory limit = %d", got)
	}
	// And lowered again, with CPU shares and a CFS quota (what kubelet's
	// in-place resize sends: every value at once).
	lower := &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 96 << 20, CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000}
	if _, err := h.rs.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id, Linux: lower}); err != nil {
		t.Fatal(err)
	}
	if got := h.memoryFile(id, "memory.limit_in_bytes", "memory.max"); got != strconv.Itoa(96<<20) {
		t.Errorf("memory limit after lowering = %s, want %d", got, 96<<20)
	}
	if h.rt.cgroups.Mode() == cgroups.V1 {
		if shares, quota := h.cpuFile(id, "cpu.shares", ""), h.cpuFile(id, "cpu.cfs_quota_us", ""); shares != "512" || quota != "50000" {
			t.Errorf("cpu.shares %s, cpu.cfs_quota_us %s; want 512, 50000", shares, quota)
		}
	} else if max := h.cpuFile(id, "", "cpu.max"); max != "50000 100000" {
		t.Errorf("cpu.max = %s, want 50000 100000", max)
	}
	if got := h.status(id).GetResources().GetLinux(); !proto.Equal(got, lower) {
		t.Errorf("ContainerStatus resources = %v, want %v", got, lower)
	}

	if h.rt.cgroups.Mode() == cgroups.V1 {
		_, err := h.rs.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
			ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.high": "1M"}},
		})
		wantCode(t, err, codes.InvalidArgument)
		if got := h.status(id).GetResources().GetLinux().GetMemoryLimitInBytes(); got != 96<<20 {
			t.Errorf("a refused update changed the recorded resources: %d", got)
		}
	}

	// Removal takes the cgroups with it.
	c, _ := h.rt.getContainer(id)
	dirs := h.rt.cgroupProcs(c)
	if _, err := h.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	for _, f := range dirs {
		pod := filepath.Dir(filepath.Dir(f))
		if _, err := os.Stat(pod); !os.IsNotExist(err) {
			t.Errorf("pod cgroup %s left behind: %v", pod, err)
		}
	}
}

func TestCreateContainerUnifiedOnV1Refused(t *testing.T) {
	h := cgroupHarness(t)
	if h.rt.cgroups.Mode() != cgroups.V1 {
		t.Skip("cgroup v2 applies unified resources")
	}
	sb, sbCfg := h.uniquePod("unified")
	cfg := containerConfig("c", nil, "true")
	cfg.Linux = &runtimeapi.LinuxContainerConfig{Resources: &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.high": "1M"}}}
	ctx := ctxT(t)
	if _, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: cfg.GetImage()}); err != nil {
		t.Fatal(err)
	}
	_, err := h.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: sbCfg})
	wantCode(t, err, codes.InvalidArgument)
	if !strings.Contains(err.Error(), "cgroup v2") {
		t.Errorf("error does not say why: %v", err)
	}
}

// oomContainer starts a container limited to 64 MiB that allocates 256 MiB
// once it is in its cgroup, and returns its status once it exited. On v2
// the container's cgroup namespace is rooted at its cgroup: "0::/" alone
// there (a hybrid host lists "0::/" too, beside its v1 hierarchies).
func (h *harness) oomContainer(place bool) *runtimeapi.ContainerStatus {
	h.t.Helper()
	sb, sbCfg := h.uniquePod("oom")
	cfg := withMemoryLimit(containerConfig("hog", nil, "/bin/sh", "-c",
		`until grep -q jetlet-pods /proc/self/cgroup || [ "$(cat /proc/self/cgroup)" = 0::/ ]; do sleep 0.01; done; exec dd if=/dev/zero of=/dev/null bs=256M count=1`), 64<<20)
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)
	if place {
		h.placeInCgroup(id)
	}
	return h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
}

func TestOOMKilledReason(t *testing.T) {
	h := cgroupHarness(t)
	st := h.oomContainer(true)
	if st.GetReason() != reasonOOMKilled || st.GetExitCode() != 137 {
		t.Fatalf("exit = %d %q, want 137 %q", st.GetExitCode(), st.GetReason(), reasonOOMKilled)
	}
	// The reason is recorded: a restarted runtime reports it too.
	h.restart()
	if got := h.status(st.GetId()).GetReason(); got != reasonOOMKilled {
		t.Errorf("reason after a restart = %q", got)
	}
}

func TestOOMKilledThroughThePodShim(t *testing.T) {
	h := cgroupHarness(t)
	st := h.oomContainer(false)
	if st.GetReason() != reasonOOMKilled || st.GetExitCode() != 137 {
		t.Fatalf("exit = %d %q, want 137 %q", st.GetExitCode(), st.GetReason(), reasonOOMKilled)
	}
}

// A container sees its own cgroup under /sys/fs/cgroup, as containerd's
// do: no other pod's (their uids name their cgroups), its own limit, and
// read-only; on cgroup v2 in a cgroup namespace, so /proc/self/cgroup
// says "0::/", for an exec too. A privileged container's is writable (on
// v1 still its own; on v2 it sees the host's tree, as containerd's, where
// its own is at its path).
func TestAContainerSeesItsOwnCgroupOnly(t *testing.T) {
	h := cgroupHarness(t)
	other, otherCfg := h.uniquePod("other")
	h.run(other, otherCfg, "c", "sleep", "1000")
	sb, sbCfg := h.uniquePod("own")
	v2 := h.rt.cgroups.Mode() == cgroups.V2
	own, limit, line := "/sys/fs/cgroup/memory", "memory.limit_in_bytes", ":memory:"
	if v2 {
		own, limit, line = `/sys/fs/cgroup$(grep '^0::' /proc/self/cgroup | cut -d: -f3)`, "memory.max", "^0::"
	}
	for _, privileged := range []bool{false, true} {
		hostTree := privileged && v2
		script := `d=` + own + `
			echo "limit $(cat $d/` + limit + `)"
			mkdir $d/sub 2>/dev/null && rmdir $d/sub && echo writable || echo read-only
			echo "cgroup $(grep -e '` + line + `' /proc/self/cgroup | cut -d: -f3)"
			sleep 1000`
		if !hostTree {
			script = `find /sys/fs/cgroup | grep -e '` + otherCfg.GetMetadata().GetUid() + `' -e '` + sbCfg.GetMetadata().GetUid() + `' | head -3
				` + script
		}
		cfg := containerConfig(fmt.Sprintf("c-%v", privileged), nil, "sh", "-c", script)
		cfg.Linux = &runtimeapi.LinuxContainerConfig{
			Resources:       &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 96 << 20},
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Privileged: privileged},
		}
		id := h.create(sb, sbCfg, cfg)
		h.startC(id)
		lines := h.waitLog(h.status(id).GetLogPath(), "cgroup ")
		var got []string
		for _, l := range lines {
			_, content, _ := strings.Cut(l, " stdout F ")
			got = append(got, content)
		}
		c, err := h.rt.getContainer(id)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"limit 100663296", "read-only", "cgroup /"}
		if privileged {
			want[1] = "writable"
		}
		if !v2 {
			want[2] = "cgroup " + c.cgroup.Paths()["memory"]
		} else if hostTree {
			want[2] = "cgroup " + c.cgroup.Paths()[""]
		}
		if !slices.Equal(got, want) {
			t.Errorf("privileged %v saw %q, want %q", privileged, got, want)
		}
		if v2 && !privileged {
			resp, err := h.rs.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Timeout: 30, Cmd: []string{"cat", "/proc/self/cgroup"}})
			if err != nil || string(resp.GetStdout()) != "0::/\n" {
				t.Errorf("an exec's /proc/self/cgroup: %q, %v; want 0::/", resp.GetStdout(), err)
			}
		}
	}
}
