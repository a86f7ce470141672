package cgroups

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	cgroupsv3 "github.com/containerd/cgroups/v3"
	"github.com/containerd/cgroups/v3/cgroup1"
	"github.com/containerd/cgroups/v3/cgroup2"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/test/poll"
)

// setup is a Hierarchy whose parent is unique to the test, removed after it.
func setup(t *testing.T) *Hierarchy {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: cgroups are made only by root")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	m, err := Setup("jetlet-test-" + hex.EncodeToString(b[:]))
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := m.Enabled(); !ok {
		t.Skipf("cgroups unavailable here: %s", why)
	}
	t.Cleanup(func() {
		// Depth first: children, then the parent.
		parent := m.Load(m.parent)
		var remove func(paths Paths)
		remove = func(paths Paths) {
			cg := m.Load(paths)
			for _, child := range childCgroups(cg.dirs()[0]) {
				remove(Child(paths, child))
			}
			if err := cg.Delete(5 * time.Second); err != nil {
				t.Errorf("remove the test's cgroups: %v", err)
			}
		}
		remove(parent.Paths())
	})
	return m
}

// file is the content of a control file of c (v1: in the hierarchy of
// controller; v2: controller is ignored).
func file(t *testing.T, c *Cgroup, controller cgroup1.Name, name string) string {
	t.Helper()
	var dir string
	if c.m.mode == V2 {
		dir = filepath.Join(c.m.unified, c.paths[""])
	} else {
		for _, s := range c.m.v1 {
			if s.Name() == controller {
				dir = hierarchyDir(s, c.paths[string(controller)])
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// runIn starts script in c the way the pod shim does: the shell writes its
// own pid to every cgroup.procs file, then execs the command. It returns the
// running command; the test ends it.
func runIn(t *testing.T, c *Cgroup, command string) *exec.Cmd {
	t.Helper()
	var join strings.Builder
	for _, f := range c.ProcsFiles() {
		join.WriteString("echo $$ > " + f + " && ")
	}
	cmd := exec.Command("/bin/sh", "-c", join.String()+"exec "+command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// inEvery reports whether pid is in c in every hierarchy.
func inEvery(c *Cgroup, pid int) bool {
	for _, f := range c.ProcsFiles() {
		procs, err := os.ReadFile(f)
		if err != nil || !slices.Contains(strings.Fields(string(procs)), strconv.Itoa(pid)) {
			return false
		}
	}
	return true
}

func TestContainerCgroupLifecycle(t *testing.T) {
	m := setup(t)
	pod, err := m.Create(m.PodPaths("", "lifecycle"), nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	res := &runtimeapi.LinuxContainerResources{
		CpuPeriod: 100000, CpuQuota: 50000, CpuShares: 512,
		MemoryLimitInBytes: 64 << 20,
	}
	c, err := m.Create(Child(pod.Paths(), "ctr"), res, 0, DefaultDevices)
	if err != nil {
		t.Fatal(err)
	}
	if m.mode == V1 {
		for name, want := range map[string]string{"cpu.cfs_quota_us": "50000", "cpu.cfs_period_us": "100000", "cpu.shares": "512"} {
			if got := file(t, c, cgroup1.Cpu, name); got != want {
				t.Errorf("%s = %s, want %s", name, got, want)
			}
		}
		if got := file(t, c, cgroup1.Memory, "memory.limit_in_bytes"); got != strconv.Itoa(64<<20) {
			t.Errorf("memory.limit_in_bytes = %s", got)
		}
		// The default devices only (the kernel lists what remains allowed).
		want := "c *:* m\nb *:* m\nc 1:3 rwm\nc 1:5 rwm\nc 1:7 rwm\nc 1:8 rwm\nc 1:9 rwm\nc 5:0 rwm\nc 5:1 rwm\nc 5:2 rwm\nc 136:* rwm"
		if got := file(t, c, cgroup1.Devices, "devices.list"); got != want {
			t.Errorf("devices.list =\n%s\nwant\n%s", got, want)
		}
		if got := file(t, pod, cgroup1.Devices, "devices.list"); got != "a *:* rwm" {
			t.Errorf("the pod's devices.list = %s, want every device", got)
		}
	} else {
		if got := file(t, c, "", "cpu.max"); got != "50000 100000" {
			t.Errorf("cpu.max = %s", got)
		}
		if got := file(t, c, "", "memory.max"); got != strconv.Itoa(64<<20) {
			t.Errorf("memory.max = %s", got)
		}
	}

	// Live update.
	if err := c.Update(&runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 20000, MemoryLimitInBytes: 128 << 20}); err != nil {
		t.Fatal(err)
	}
	st, err := c.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.MemoryLimit != 128<<20 {
		t.Errorf("memory limit after update = %d, want %d", st.MemoryLimit, 128<<20)
	}
	if m.mode == V1 {
		if got := file(t, c, cgroup1.Cpu, "cpu.cfs_quota_us"); got != "20000" {
			t.Errorf("cpu.cfs_quota_us after update = %s", got)
		}
	}

	// A process placed in it is accounted there.
	cmd := runIn(t, c, `/bin/sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exec sleep 600'`)
	// The shell joins the v1 hierarchies one by one: usage shows in the
	// first ones before the process is in the pids hierarchy.
	poll.Until(t, 30*time.Second, func() string { return "the process and its usage in the cgroup" }, func() bool {
		if !inEvery(c, cmd.Process.Pid) {
			return false
		}
		st, err = c.Stats()
		return err == nil && st.CPUUsageNanos > 0 && st.MemoryUsage > 0 && st.WorkingSet > 0
	})
	if st.Processes != 1 && m.hasPids() {
		t.Errorf("processes = %d, want 1", st.Processes)
	}
	if c.OOMKilled() {
		t.Error("OOMKilled without an OOM kill")
	}

	// Neither removed while in use: the pod holds the container's cgroup
	// (which may be another runtime's), the container a process.
	if err := pod.Delete(time.Minute); err == nil || !strings.Contains(err.Error(), "holds the cgroups [ctr]") {
		t.Fatalf("deleting a pod cgroup holding a container's: %v", err)
	}
	if err := c.Delete(100 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "still holds processes ["+strconv.Itoa(cmd.Process.Pid)+"]") {
		t.Fatalf("deleting a cgroup holding a process: %v", err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err := c.Delete(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := pod.Delete(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, dir := range append(c.dirs(), pod.dirs()...) {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", dir, err)
		}
	}
	if err := pod.Delete(time.Second); err != nil {
		t.Errorf("deleting a deleted cgroup: %v", err)
	}
}

func (m *Hierarchy) hasPids() bool {
	_, ok := m.parent[string(cgroup1.Pids)]
	return ok || m.mode == V2
}

func TestOOMKilled(t *testing.T) {
	m := setup(t)
	c, err := m.Create(m.PodPaths("", "oom"), &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20, MemorySwapLimitInBytes: 64 << 20}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := runIn(t, c, "dd if=/dev/zero of=/dev/null bs=256M count=1")
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("dd of 256 MiB in 64 MiB ended with %v, want killed by SIGKILL", err)
	}
	if !c.OOMKilled() {
		t.Fatal("OOMKilled() = false after an OOM kill")
	}
	if err := c.Delete(5 * time.Second); err != nil {
		t.Fatal(err)
	}
}

// A memory limit with swap as large (NoSwap on v1) is raised and lowered in
// place: v1 takes a memory limit only at most the memory+swap one, so the
// two are written in the order each way needs.
func TestMemoryAndSwapLimitsRaisedAndLowered(t *testing.T) {
	m := setup(t)
	limits := func(mib int64) *runtimeapi.LinuxContainerResources {
		return &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: mib << 20, MemorySwapLimitInBytes: mib << 20}
	}
	c, err := m.Create(m.PodPaths("", "swap"), limits(64), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, mib := range []int64{128, 32, 256} {
		if err := c.Update(limits(mib)); err != nil {
			t.Fatalf("to %d MiB: %v", mib, err)
		}
		names := []string{"memory.limit_in_bytes"}
		if m.swap {
			names = append(names, "memory.memsw.limit_in_bytes")
		}
		if m.mode == V2 {
			names = []string{"memory.max"}
		}
		for _, name := range names {
			if got := file(t, c, cgroup1.Memory, name); got != strconv.FormatInt(mib<<20, 10) {
				t.Errorf("to %d MiB: %s = %s", mib, name, got)
			}
		}
	}
}

func TestPodPidsLimit(t *testing.T) {
	m := setup(t)
	if !m.hasPids() {
		t.Skip("no pids controller")
	}
	pod, err := m.Create(m.PodPaths("", "pids"), nil, 42, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := file(t, pod, cgroup1.Pids, "pids.max"); got != "42" {
		t.Errorf("pids.max = %s, want 42", got)
	}
	unlimited, err := m.Create(m.PodPaths("", "nopids"), nil, -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := file(t, unlimited, cgroup1.Pids, "pids.max"); got != "max" {
		t.Errorf("pids.max without a limit = %s, want max", got)
	}
}

func TestCgroupParentAndUnified(t *testing.T) {
	m := setup(t)
	for _, tc := range []struct{ parent, uid, want string }{
		{"/jetlet-test-parent", "uid1", "/jetlet-test-parent/poduid1"},
		{"../../etc", "../../x", "/etc/pod.._.._x"},
	} {
		for _, p := range m.PodPaths(tc.parent, tc.uid) {
			if p != tc.want {
				t.Errorf("PodPaths(%q, %q) = %s, want %s", tc.parent, tc.uid, p, tc.want)
			}
		}
	}
	c, err := m.Create(Child(m.parent, "unified"), &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.high": "1M"}}, 0, nil)
	if m.mode == V1 && !errors.Is(err, ErrUnsupported) {
		t.Errorf("unified resources on cgroup v1: got %v, want ErrUnsupported", err)
	}
	if m.mode != V2 {
		return
	}
	if err != nil {
		t.Fatalf("unified resources on cgroup v2: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(time.Minute) })
	if got := file(t, c, "", "memory.high"); got != "1048576" {
		t.Errorf("memory.high after Create = %s, want 1048576", got)
	}
	if err := c.Update(&runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.high": "2097152"}}); err != nil {
		t.Fatal(err)
	}
	if got := file(t, c, "", "memory.high"); got != "2097152" {
		t.Errorf("memory.high after Update = %s, want 2097152", got)
	}
	for _, bad := range []string{"../memory.high", "memory", ".memory.high", "memory/high"} {
		if err := c.Update(&runtimeapi.LinuxContainerResources{Unified: map[string]string{bad: "1"}}); !errors.Is(err, ErrUnsupported) {
			t.Errorf("unified resource %q: got %v, want ErrUnsupported", bad, err)
		}
	}
}

func TestOff(t *testing.T) {
	m := off("testing")
	if ok, why := m.Enabled(); ok || why != "testing" {
		t.Errorf("Enabled() = %v, %q", ok, why)
	}
	if _, err := m.Create(Paths{"": "/x"}, nil, 0, nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Create when off: %v", err)
	}
	if m.Load(Paths{"": "/x"}) != nil {
		t.Error("Load when off is not nil")
	}
}

// BenchmarkCreateDelete measures what cgroups add to a pod start and removal:
// a pod cgroup with a pids limit, a container cgroup with CPU and memory
// limits, then both removed.
func BenchmarkCreateDelete(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	m, err := Setup("jetlet-bench")
	if err != nil {
		b.Fatal(err)
	}
	if ok, why := m.Enabled(); !ok {
		b.Skip(why)
	}
	defer m.Load(m.parent).Delete(5 * time.Second)
	res := &runtimeapi.LinuxContainerResources{CpuPeriod: 100000, CpuQuota: 50000, CpuShares: 512, MemoryLimitInBytes: 64 << 20}
	for i := 0; b.Loop(); i++ {
		pod, err := m.Create(m.PodPaths("", strconv.Itoa(i)), nil, 1024, nil)
		if err != nil {
			b.Fatal(err)
		}
		ctr, err := m.Create(Child(pod.Paths(), "ctr"), res, 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := ctr.Delete(5 * time.Second); err != nil {
			b.Fatal(err)
		}
		if err := pod.Delete(5 * time.Second); err != nil {
			b.Fatal(err)
		}
	}
}

// TestV2Tree runs the v2 code on the v2 tree of a hybrid host, which holds
// processes but no cpu or memory controller: creation, placement, CPU time,
// its pressure stall information, refusal while in use, removal.
func TestV2Tree(t *testing.T) {
	const hybridUnified = "/sys/fs/cgroup/unified"
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if cgroupsv3.Mode() != cgroupsv3.Hybrid {
		t.Skip("not a hybrid host: the v2 tree is covered by the other tests on a v2 host")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	m := &Hierarchy{mode: V2, unified: hybridUnified, parent: Paths{"": "/jetlet-test-" + hex.EncodeToString(b[:])}}
	pod, err := m.Create(m.PodPaths("", "v2"), nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Create(Child(pod.Paths(), "ctr"), nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(hybridUnified, m.parent[""], "podv2", "ctr", "cgroup.procs")
	if got := c.ProcsFiles(); len(got) != 1 || got[0] != want {
		t.Fatalf("ProcsFiles() = %v, want [%s]", got, want)
	}
	cmd := runIn(t, c, `/bin/sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; exec sleep 600'`)
	var st *Stats
	poll.Until(t, 30*time.Second, poll.Msg("CPU time in the v2 cgroup"), func() bool {
		st, err = c.Stats()
		return err == nil && st.CPUUsageNanos > 0
	})
	// A kernel with PSI has it in every v2 cgroup, controllers or not.
	if _, err := os.Stat("/proc/pressure/cpu"); err == nil && (st.CPUPressure.GetSome() == nil || st.IOPressure.GetSome() == nil) {
		t.Errorf("the kernel has PSI, the v2 cgroup's stats none: cpu %v, io %v", st.CPUPressure, st.IOPressure)
	}
	if c.OOMKilled() {
		t.Error("OOMKilled without a memory controller")
	}
	if err := c.Delete(100 * time.Millisecond); err == nil {
		t.Fatal("deleted a v2 cgroup holding a process")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	for _, cg := range []*Cgroup{c, pod, m.Load(m.parent)} {
		if err := cg.Delete(5 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(hybridUnified, m.parent[""])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("v2 parent left behind: %v", err)
	}
}

// The device rules a container gets compile to v2's eBPF filter: on any host,
// though the filter is loaded on v2 alone (it dereferenced a rule's missing
// numbers there).
func TestDeviceRulesCompileForV2(t *testing.T) {
	if _, _, err := cgroup2.DeviceFilter(append([]DeviceRule{denyAllDevices}, DefaultDevices...)); err != nil {
		t.Fatal(err)
	}
}

// A container's process opens the default devices and no other, on v1 and v2.
func TestContainerDevices(t *testing.T) {
	m := setup(t)
	pod, err := m.Create(m.PodPaths("", "devices"), nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Create(Child(pod.Paths(), "ctr"), nil, 0, DefaultDevices)
	if err != nil {
		t.Fatal(err)
	}
	// dd count=0 opens the device and reads nothing. /dev/kmsg (c 1:11) is
	// not a default device; the test's own process may open it.
	open := func(c *Cgroup, dev string) error {
		if c == nil {
			return exec.Command("dd", "if="+dev, "of=/dev/null", "count=0").Run()
		}
		return runIn(t, c, "dd if="+dev+" of=/dev/null count=0 2>/dev/null").Wait()
	}
	if err := open(nil, "/dev/kmsg"); err != nil {
		t.Fatalf("open /dev/kmsg outside the container's cgroup: %v", err)
	}
	if err := open(c, "/dev/null"); err != nil {
		t.Errorf("open /dev/null in the container's cgroup: %v", err)
	}
	if err := open(c, "/dev/kmsg"); err == nil {
		t.Error("opened /dev/kmsg in the container's cgroup: it is not a default device")
	}
	privileged, err := m.Create(Child(pod.Paths(), "privileged"), nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := open(privileged, "/dev/kmsg"); err != nil {
		t.Errorf("open /dev/kmsg in a cgroup without device rules: %v", err)
	}
}

func TestDeviceRuleWithoutNumbers(t *testing.T) {
	m := setup(t)
	_, err := m.Create(m.PodPaths("", "badrule"), nil, 0, []DeviceRule{{Allow: true, Type: "c", Access: "rwm"}})
	if err == nil || !strings.Contains(err.Error(), "device rule") {
		t.Fatalf("Create with a rule without numbers: %v, want an error naming the rule", err)
	}
}

// A second runtime in the process makes its cgroups beside the first's: on
// v2 the first moved the process to its leaf, which is no new parent.
func TestSetupTwiceSameParent(t *testing.T) {
	first, second := setup(t), setup(t)
	for name, p := range first.parent {
		if filepath.Dir(p) != filepath.Dir(second.parent[name]) {
			t.Errorf("%q: the runtimes' parents %s and %s are not siblings", name, p, second.parent[name])
		}
	}
}

// A v2 cgroup is the runtime's to write below only when it is writable;
// else Setup refuses, naming the file.
func TestCheckDelegated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a read-only mount")
	}
	unified := t.TempDir()
	unit := "/system.slice/jetlet.service"
	if err := os.MkdirAll(filepath.Join(unified, unit), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cgroup.procs", "cgroup.subtree_control"} {
		if err := os.WriteFile(filepath.Join(unified, unit, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkDelegated(unified, unit); err != nil {
		t.Errorf("a writable cgroup: %v, want it delegated", err)
	}

	// Read-only (a container's /sys/fs/cgroup mounted ro): refused.
	if err := unix.Mount(unified, unified, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(unified, unix.MNT_DETACH) })
	if err := unix.Mount("", unified, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatal(err)
	}
	err := checkDelegated(unified, unit)
	if !errors.Is(err, ErrNotDelegated) || !strings.Contains(err.Error(), "cannot write") {
		t.Errorf("a read-only cgroup: %v, want ErrNotDelegated: cannot write", err)
	}
}

// An orphaned pod cgroup goes with the empty cgroups below it; one that
// keep claims stays, and so does one with a process anywhere below it (a
// pod running, its record lost), whole, until the process ends.
func TestRemoveOrphans(t *testing.T) {
	m := setup(t)
	mk := func(uid string) (*Cgroup, *Cgroup) {
		pod, err := m.Create(m.PodPaths("", uid), nil, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"exited", "running"} {
			if _, err := m.Create(Child(pod.Paths(), name), nil, 0, nil); err != nil {
				t.Fatal(err)
			}
		}
		return pod, m.Load(Child(pod.Paths(), "running"))
	}
	orphan, _ := mk("orphan")
	kept, _ := mk("kept")
	busy, busyCtr := mk("busy")
	cmd := runIn(t, busyCtr, "sleep 600")
	poll.Until(t, 30*time.Second, func() string { return "the process in its cgroup" }, func() bool {
		return file(t, busyCtr, cgroup1.Pids, "cgroup.procs") != ""
	})
	keep := func(name string) bool { return name == "podkept" }

	if n, err := m.RemoveOrphans(keep, time.Hour); n != 0 || err != nil {
		t.Fatalf("cgroups made just now: %d removed, %v", n, err)
	}
	if n, err := m.RemoveOrphans(keep, 0); n != 1 || err != nil {
		t.Fatalf("removed %d, %v; want the orphan only", n, err)
	}
	exists := func(c *Cgroup, name string) bool {
		for _, dir := range m.Load(Child(c.Paths(), name)).dirs() {
			if _, err := os.Stat(dir); err != nil {
				return false
			}
		}
		return true
	}
	for _, dir := range orphan.dirs() {
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("orphan %s: %v", dir, err)
		}
	}
	for _, c := range []*Cgroup{kept, busy} {
		if !exists(c, "exited") || !exists(c, "running") {
			t.Errorf("%s lost a cgroup", c)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	poll.Until(t, 30*time.Second, func() string { return "the busy pod's cgroup removed once its process ended" }, func() bool {
		n, _ := m.RemoveOrphans(keep, 0)
		return n == 1
	})
	if !exists(kept, "running") {
		t.Errorf("%s removed", kept)
	}
}
