package eviction

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/crilabels"
	"github.com/jetlet/jetlet/test/tmpfstest"
)

// The observer's roles are the CRI client's calls as they are.
var _ StatsRuntime = (*runtime.Client)(nil)

// fakeStatsRuntime answers the observer's CRI calls with what it holds.
type fakeStatsRuntime struct {
	imageFs       string // ImageFsInfo's mountpoint
	containerFs   string // its container file system's; "": none named
	imageFsErr    error
	sandboxes     []*runtimeapi.PodSandboxStats
	sandboxesErr  error
	containers    []*runtimeapi.ContainerStats
	containersErr error
}

func (f *fakeStatsRuntime) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	if f.imageFsErr != nil {
		return nil, f.imageFsErr
	}
	resp := &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{
		{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: f.imageFs}},
	}}
	if f.containerFs != "" {
		resp.ContainerFilesystems = []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: f.containerFs}}}
	}
	return resp, nil
}

func (f *fakeStatsRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return f.sandboxes, f.sandboxesErr
}

func (f *fakeStatsRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return f.containers, f.containersErr
}

// The real observer on this machine: real /proc, cgroups and statfs.
func TestNodeObserverOnThisMachine(t *testing.T) {
	dataDir := t.TempDir()
	o, err := NewNodeObserver(&fakeStatsRuntime{imageFs: t.TempDir()}, NodeObserverConfig{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := o.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Signal{SignalMemoryAvailable, SignalNodeFsAvailable, SignalImageFsAvailable, SignalPIDAvailable} {
		o, ok := obs.Signals[s]
		if !ok {
			t.Fatalf("%s not observed", s)
		}
		if o.Available.Sign() <= 0 || o.Available.Cmp(o.Capacity) > 0 {
			t.Errorf("%s: available %s of %s; want more than 0, at most the capacity", s, &o.Available, &o.Capacity)
		}
		t.Logf("%s: %s of %s", s, &o.Available, &o.Capacity)
	}
	// The capacity memory.available is taken from is the node's (what node
	// status reports, from sysinfo).
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	if mem := obs.Signals[SignalMemoryAvailable].Capacity; mem.Value() != int64(si.Totalram)*int64(si.Unit) {
		t.Errorf("memory capacity %s; sysinfo says %d", &mem, int64(si.Totalram)*int64(si.Unit))
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dataDir, &fs); err != nil {
		t.Fatal(err)
	}
	if _, ok := obs.Signals[SignalNodeFsInodesFree]; ok != (fs.Files > 0) {
		t.Errorf("nodefs.inodesFree observed: %v; the file system counts %d inodes", ok, fs.Files)
	}
	if obs.DedicatedImageFs {
		t.Error("two temp dirs on one file system: no dedicated imagefs")
	}
}

// TestNodeObserverSplitImageFs: a runtime naming its images' and its
// containers' file systems apart (two tmpfs mounts) has imagefs observed on
// the first and containerfs on the second.
func TestNodeObserverSplitImageFs(t *testing.T) {
	images, containers := tmpfstest.Mount(t, 16<<20, 1000), tmpfstest.Mount(t, 8<<20, 500)
	o, err := NewNodeObserver(&fakeStatsRuntime{imageFs: images, containerFs: containers}, NodeObserverConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := o.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[Signal]int64{SignalImageFsAvailable: 16 << 20, SignalImageFsInodesFree: 1000, SignalContainerFsAvailable: 8 << 20, SignalContainerFsInodesFree: 500} {
		if got := obs.Signals[s].Capacity; got.Value() != want {
			t.Errorf("%s capacity %s, want %d", s, &got, want)
		}
	}
	if !obs.DedicatedImageFs || !obs.SplitContainerFs {
		t.Errorf("dedicated imagefs %v, split containerfs %v; want both", obs.DedicatedImageFs, obs.SplitContainerFs)
	}

	// Named on the image file system, or not at all: containerfs is imagefs.
	for _, containerFs := range []string{"", images} {
		o, _ := NewNodeObserver(&fakeStatsRuntime{imageFs: images, containerFs: containerFs}, NodeObserverConfig{DataDir: t.TempDir()})
		obs, err := o.Observe(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if c := obs.Signals[SignalContainerFsAvailable].Capacity; c.Value() != 16<<20 || obs.SplitContainerFs {
			t.Errorf("container fs %q: containerfs capacity %s, split %v; want imagefs's, not split", containerFs, &c, obs.SplitContainerFs)
		}
	}
}

func TestNodeObserverWithoutImageFs(t *testing.T) {
	o, err := NewNodeObserver(&fakeStatsRuntime{imageFsErr: fmt.Errorf("runtime down: %w", crierr.ErrUnavailable)}, NodeObserverConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := o.Observe(context.Background())
	if err != nil {
		t.Fatalf("a runtime that is down must not blind the node to memory: %v", err)
	}
	if _, ok := obs.Signals[SignalImageFsAvailable]; ok {
		t.Error("imagefs observed without a runtime to say where it is")
	}
	if _, ok := obs.Signals[SignalMemoryAvailable]; !ok {
		t.Error("memory not observed")
	}
}

// writeFiles makes each file under root with its content.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const meminfo = "MemTotal:       1048576 kB\nMemFree:         524288 kB\nInactive(file):   65536 kB\n"

func TestMemoryAvailable(t *testing.T) {
	tests := []struct {
		name     string
		cgroup   map[string]string
		want     int64 // available bytes of 1Gi
		wantErrs bool
	}{
		{name: "cgroup v1: usage less total_inactive_file",
			cgroup: map[string]string{
				"memory/memory.usage_in_bytes": "536870912\n",
				"memory/memory.stat":           "inactive_file 1\ntotal_inactive_file 134217728\n",
			},
			want: 1<<30 - (512<<20 - 128<<20)},
		{name: "cgroup v1: inactive file above usage is not subtracted",
			cgroup: map[string]string{
				"memory/memory.usage_in_bytes": "1048576\n",
				"memory/memory.stat":           "total_inactive_file 2097152\n",
			},
			want: 1<<30 - 1<<20},
		{name: "cgroup v2: meminfo's used less the root's inactive_file",
			cgroup: map[string]string{"cgroup.controllers": "memory pids\n", "memory.stat": "anon 1\ninactive_file 268435456\n"},
			want:   1<<30 - (512<<20 - 256<<20)},
		{name: "cgroup v2 without a root memory.stat: meminfo's Inactive(file)",
			cgroup: map[string]string{"cgroup.controllers": "memory pids\n"},
			want:   1<<30 - (512<<20 - 64<<20)},
		{name: "cgroup v1 without the memory controller", cgroup: map[string]string{}, wantErrs: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc, cgroup := t.TempDir(), t.TempDir()
			writeFiles(t, proc, map[string]string{"meminfo": meminfo})
			writeFiles(t, cgroup, tc.cgroup)
			o, err := NewNodeObserver(&fakeStatsRuntime{}, NodeObserverConfig{DataDir: t.TempDir(), ProcDir: proc, CgroupDir: cgroup})
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.memory()
			if tc.wantErrs {
				if err == nil {
					t.Fatalf("memory = %v; want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Available.Value() != tc.want || got.Capacity.Value() != 1<<30 {
				t.Fatalf("memory.available = %s of %s; want %d of 1Gi", &got.Available, &got.Capacity, tc.want)
			}
		})
	}
}

func TestPIDsAvailable(t *testing.T) {
	tests := []struct {
		name     string
		proc     map[string]string
		want     int64
		capacity int64
		wantErr  bool
	}{
		{name: "the lower limit less the tasks",
			proc: map[string]string{"sys/kernel/pid_max": "32768\n", "sys/kernel/threads-max": "192725\n", "loadavg": "0.38 1.93 3.40 2/88 13999\n"},
			want: 32768 - 88, capacity: 32768},
		{name: "threads-max lower",
			proc: map[string]string{"sys/kernel/pid_max": "4194304\n", "sys/kernel/threads-max": "1000\n", "loadavg": "0 0 0 1/100 5\n"},
			want: 900, capacity: 1000},
		{name: "one limit readable",
			proc: map[string]string{"sys/kernel/pid_max": "32768\n", "loadavg": "0 0 0 1/768 5\n"},
			want: 32000, capacity: 32768},
		{name: "no limit", proc: map[string]string{"loadavg": "0 0 0 1/768 5\n"}, wantErr: true},
		{name: "loadavg without tasks", proc: map[string]string{"sys/kernel/pid_max": "32768\n", "loadavg": "0 0 0\n"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc := t.TempDir()
			writeFiles(t, proc, tc.proc)
			o, err := NewNodeObserver(&fakeStatsRuntime{}, NodeObserverConfig{DataDir: t.TempDir(), ProcDir: proc})
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.pids()
			if tc.wantErr {
				if err == nil {
					t.Fatalf("pid.available = %v; want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Available.Value() != tc.want || got.Capacity.Value() != tc.capacity {
				t.Fatalf("pid.available = %s of %s; want %d of %d", &got.Available, &got.Capacity, tc.want, tc.capacity)
			}
		})
	}
}

func u64(n uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: n} }

func containerStats(uid, name string, workingSet uint64, layer *runtimeapi.FilesystemUsage) *runtimeapi.ContainerStats {
	return &runtimeapi.ContainerStats{
		Attributes:    &runtimeapi.ContainerAttributes{Labels: map[string]string{crilabels.LabelPodUID: uid, crilabels.LabelContainerName: name}},
		Memory:        &runtimeapi.MemoryUsage{WorkingSetBytes: u64(workingSet)},
		WritableLayer: layer,
	}
}

func TestPodUsage(t *testing.T) {
	dataDir := t.TempDir()
	logDir := filepath.Join(dataDir, "logs")
	// Pod p1: an emptyDir holding 64KiB, logs of a running container and of
	// one that exited.
	writeFiles(t, dataDir, map[string]string{
		"pods/p1/volumes/kubernetes.io~empty-dir/cache/data": strings.Repeat("x", 64<<10),
		"logs/default_web_p1/app/0.log":                      strings.Repeat("l", 8<<10),
		"logs/default_web_p1/init/0.log":                     "done\n",
		"logs/not-a-pod-dir":                                 "",
	})
	// A hard link is counted once, as du counts it.
	if err := os.Link(filepath.Join(dataDir, "pods/p1/volumes/kubernetes.io~empty-dir/cache/data"),
		filepath.Join(dataDir, "pods/p1/volumes/kubernetes.io~empty-dir/cache/link")); err != nil {
		t.Fatal(err)
	}
	rt := &fakeStatsRuntime{
		sandboxes: []*runtimeapi.PodSandboxStats{{
			Attributes: &runtimeapi.PodSandboxAttributes{Labels: map[string]string{crilabels.LabelPodUID: "p1"}},
			Linux: &runtimeapi.LinuxPodSandboxStats{
				Memory:  &runtimeapi.MemoryUsage{WorkingSetBytes: u64(300 << 20)},
				Process: &runtimeapi.ProcessUsage{ProcessCount: u64(7)},
			},
		}},
		containers: []*runtimeapi.ContainerStats{
			containerStats("p1", "app", 200<<20, &runtimeapi.FilesystemUsage{UsedBytes: u64(1 << 20), InodesUsed: u64(12)}),
			containerStats("p2", "db", 100<<20, nil),
			containerStats("p2", "backup", 50<<20, nil),
			{Attributes: &runtimeapi.ContainerAttributes{}}, // not a pod's: ignored
		},
	}
	o, err := NewNodeObserver(rt, NodeObserverConfig{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	usage, err := o.PodUsage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(usage) != 2 {
		t.Fatalf("usage of %d pods; want p1 and p2: %+v", len(usage), usage)
	}

	p1 := usage["p1"]
	if p1.MemoryWorkingSet != 300<<20 || p1.Processes != 7 {
		t.Errorf("p1: memory %d, processes %d; want the sandbox's 300Mi and 7", p1.MemoryWorkingSet, p1.Processes)
	}
	if p1.Volumes.Bytes < 64<<10 || p1.Volumes.Bytes >= 128<<10 || p1.Volumes.Inodes != 4 {
		t.Errorf("p1 volumes = %+v; want 64KiB once and 4 inodes (volumes, the plugin dir, cache, data)", p1.Volumes)
	}
	if len(p1.Containers) != 2 {
		t.Fatalf("p1 containers = %+v; want app and the exited init", p1.Containers)
	}
	app, init := p1.Containers[0], p1.Containers[1]
	if app.Name != "app" || *app.MemoryWorkingSet != 200<<20 || *app.WritableLayer != (DiskUsage{1 << 20, 12}) {
		t.Errorf("app = %+v", app)
	}
	if app.Logs == nil || app.Logs.Bytes < 8<<10 || app.Logs.Inodes != 2 {
		t.Errorf("app logs = %+v; want its directory and 8KiB log", app.Logs)
	}
	if init.Name != "init" || init.Logs == nil || init.MemoryWorkingSet != nil || init.WritableLayer != nil {
		t.Errorf("init = %+v; want its logs only", init)
	}

	p2 := usage["p2"]
	if p2.MemoryWorkingSet != 150<<20 || p2.Volumes != (DiskUsage{}) {
		t.Errorf("p2 = %+v; want its containers' memory added up (no sandbox stats), no volumes", p2)
	}
	if logDir != o.cfg.LogDir {
		t.Errorf("log dir %s; want reconcile's default %s", o.cfg.LogDir, logDir)
	}
}

func TestPodUsageRuntimeErrors(t *testing.T) {
	dataDir := t.TempDir()
	rt := &fakeStatsRuntime{
		sandboxesErr: fmt.Errorf("ListPodSandboxStats: %w", crierr.ErrUnimplemented),
		containers:   []*runtimeapi.ContainerStats{containerStats("p1", "app", 10<<20, nil)},
	}
	o, err := NewNodeObserver(rt, NodeObserverConfig{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	usage, err := o.PodUsage(context.Background())
	if err != nil || usage["p1"].MemoryWorkingSet != 10<<20 {
		t.Fatalf("usage = %+v, %v; a runtime without sandbox stats is measured by its containers", usage, err)
	}
	rt.containersErr = fmt.Errorf("ListContainerStats: %w", crierr.ErrUnavailable)
	if _, err := o.PodUsage(context.Background()); err == nil {
		t.Fatal("no error when the runtime cannot list containers' stats")
	}
}

func TestNewNodeObserverRefuses(t *testing.T) {
	if _, err := NewNodeObserver(nil, NodeObserverConfig{DataDir: "/x"}); err == nil {
		t.Error("no runtime accepted")
	}
	if _, err := NewNodeObserver(&fakeStatsRuntime{}, NodeObserverConfig{}); err == nil {
		t.Error("no data dir accepted")
	}
}
