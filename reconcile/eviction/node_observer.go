package eviction

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/diskusage"
	"github.com/jetlet/jetlet/reconcile/stats"
	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/crilabels"
)

// The CRI calls the observer makes, with *runtime.Client's signatures.

// PodStatsRuntime reports pods' and containers' usage.
type PodStatsRuntime interface {
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
}

// ImageFsRuntime says where the runtime keeps images and writable layers.
type ImageFsRuntime interface {
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
}

// StatsRuntime is everything the observer asks of the runtime.
type StatsRuntime interface {
	PodStatsRuntime
	ImageFsRuntime
}

// NodeObserverConfig configures a NodeObserver. DataDir is required.
type NodeObserverConfig struct {
	// DataDir is jetlet's data dir: its file system is nodefs, and a pod's
	// local volumes are under <DataDir>/pods/<uid>/volumes (reconcile's
	// layout).
	DataDir string
	// LogDir holds pods' logs, <LogDir>/<namespace>_<name>_<uid>/<container>/
	// (reconcile's layout). Default <DataDir>/logs, reconcile's default.
	LogDir string
	// ProcDir and CgroupDir are where procfs and the cgroup file systems are
	// mounted: /proc and /sys/fs/cgroup by default.
	ProcDir   string
	CgroupDir string
	// Logger is used with component=eviction. The zero value logs nothing.
	Logger zerolog.Logger
}

// NodeObserver measures the node as kubelet's summary provider does, on
// Linux with cgroup v1 or v2.
type NodeObserver struct {
	runtime StatsRuntime
	cfg     NodeObserverConfig
	log     zerolog.Logger
}

// NewNodeObserver returns an observer of this node. It does no I/O.
func NewNodeObserver(runtime StatsRuntime, cfg NodeObserverConfig) (*NodeObserver, error) {
	if runtime == nil {
		return nil, fmt.Errorf("%w: the node observer needs a runtime", ErrInvalidConfig)
	}
	if cfg.DataDir == "" {
		return nil, fmt.Errorf("%w: the node observer needs the data dir", ErrInvalidConfig)
	}
	if cfg.LogDir == "" {
		cfg.LogDir = filepath.Join(cfg.DataDir, "logs")
	}
	if cfg.ProcDir == "" {
		cfg.ProcDir = "/proc"
	}
	if cfg.CgroupDir == "" {
		cfg.CgroupDir = "/sys/fs/cgroup"
	}
	return &NodeObserver{runtime: runtime, cfg: cfg, log: cfg.Logger.With().Str("component", "eviction").Logger()}, nil
}

// Observe measures memory, nodefs, imagefs, containerfs and PIDs. Memory,
// nodefs and PIDs must be measured; imagefs and containerfs are left out
// with a warning when the runtime cannot say where they are, so that a
// runtime that is down does not blind the node to memory pressure.
func (o *NodeObserver) Observe(ctx context.Context) (Observations, error) {
	signals := map[Signal]Observation{}
	memory, err := o.memory()
	if err != nil {
		return Observations{}, err
	}
	signals[SignalMemoryAvailable] = memory
	nodeFs, err := statFs(o.cfg.DataDir)
	if err != nil {
		return Observations{}, fmt.Errorf("nodefs: %w", err)
	}
	nodeFs.observe(signals, SignalNodeFsAvailable, SignalNodeFsInodesFree)
	pids, err := o.pids()
	if err != nil {
		return Observations{}, err
	}
	signals[SignalPIDAvailable] = pids

	obs := Observations{Signals: signals}
	imageDir, containerDir, err := o.runtimeFsMountpoints(ctx)
	if err != nil {
		o.log.Warn().Err(err).Msg("imagefs and containerfs not observed: their thresholds are not evaluated")
		return obs, nil
	}
	imageFs, err := statFs(imageDir)
	if err != nil {
		o.log.Warn().Err(err).Str("mountpoint", imageDir).Msg("imagefs and containerfs not observed: their thresholds are not evaluated")
		return obs, nil
	}
	imageFs.observe(signals, SignalImageFsAvailable, SignalImageFsInodesFree)
	obs.DedicatedImageFs = imageFs.device != nodeFs.device
	containerFs := imageFs
	if containerDir != imageDir {
		if containerFs, err = statFs(containerDir); err != nil {
			o.log.Warn().Err(err).Str("mountpoint", containerDir).Msg("containerfs not observed: its thresholds are not evaluated")
			return obs, nil
		}
	}
	containerFs.observe(signals, SignalContainerFsAvailable, SignalContainerFsInodesFree)
	obs.SplitContainerFs = containerFs.device != imageFs.device
	return obs, nil
}

// memory is memory.available as cadvisor and kubelet compute it: the
// machine's memory less the root cgroup's working set (reconcile/stats).
func (o *NodeObserver) memory() (Observation, error) {
	m, err := stats.ReadNodeMemory(o.cfg.ProcDir, o.cfg.CgroupDir)
	if err != nil {
		return Observation{}, err
	}
	return Observation{
		Available: *resource.NewQuantity(max(m.Capacity-m.WorkingSet, 0), resource.BinarySI),
		Capacity:  *resource.NewQuantity(m.Capacity, resource.BinarySI),
	}, nil
}

// pids is pid.available as kubelet computes it: the kernel's task limit (the
// lower of kernel.pid_max and kernel.threads-max, whichever can be read)
// less the tasks that exist, read from /proc/loadavg (sysinfo's count is 16
// bits wide).
func (o *NodeObserver) pids() (Observation, error) {
	var limit int64 = -1
	for _, name := range []string{"sys/kernel/pid_max", "sys/kernel/threads-max"} {
		if n, err := readInt64(filepath.Join(o.cfg.ProcDir, name)); err == nil && (limit < 0 || n < limit) {
			limit = n
		}
	}
	if limit < 0 {
		return Observation{}, errors.New("pid.available: neither kernel.pid_max nor kernel.threads-max can be read")
	}
	tasks, err := o.taskCount()
	if err != nil {
		return Observation{}, fmt.Errorf("pid.available: %w", err)
	}
	return Observation{
		Available: *resource.NewQuantity(limit-tasks, resource.DecimalSI),
		Capacity:  *resource.NewQuantity(limit, resource.DecimalSI),
	}, nil
}

// taskCount is the fourth field of /proc/loadavg's denominator
// ("0.38 1.93 3.40 2/88 13999": 88 tasks).
func (o *NodeObserver) taskCount() (int64, error) {
	b, err := os.ReadFile(filepath.Join(o.cfg.ProcDir, "loadavg"))
	if err != nil {
		return 0, err
	}
	fields := strings.Fields(string(b))
	if len(fields) < 4 {
		return 0, fmt.Errorf("loadavg %q: too few fields", b)
	}
	_, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return 0, fmt.Errorf("loadavg %q: no task count", b)
	}
	return strconv.ParseInt(total, 10, 64)
}

// runtimeFsMountpoints are where the runtime says its images and its
// containers' writable layers are: the mountpoints of its first image and
// first container file system, as kubelet's CRI stats provider reads them
// (the image file system's when it names no container file system).
func (o *NodeObserver) runtimeFsMountpoints(ctx context.Context) (images, containers string, err error) {
	info, err := o.runtime.ImageFsInfo(ctx)
	if err != nil {
		return "", "", err
	}
	fs := info.GetImageFilesystems()
	if len(fs) == 0 || fs[0].GetFsId().GetMountpoint() == "" {
		return "", "", errors.New("the runtime names no image file system")
	}
	images, containers = fs[0].GetFsId().GetMountpoint(), fs[0].GetFsId().GetMountpoint()
	if fs := info.GetContainerFilesystems(); len(fs) > 0 && fs[0].GetFsId().GetMountpoint() != "" {
		containers = fs[0].GetFsId().GetMountpoint()
	}
	return images, containers, nil
}

// fsStat is a file system's size and free space, bytes and inodes.
type fsStat struct {
	device              uint64
	capacity, available int64
	inodes, inodesFree  int64
}

// statFs measures the file system holding path, as cadvisor: available is
// what an unprivileged user may still write.
func statFs(path string) (fsStat, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return fsStat{}, err
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fsStat{}, err
	}
	return fsStat{
		device:     st.Dev,
		capacity:   int64(fs.Blocks) * fs.Bsize,
		available:  int64(fs.Bavail) * fs.Bsize,
		inodes:     int64(fs.Files),
		inodesFree: int64(fs.Ffree),
	}, nil
}

// observe records the file system's space and inodes as the two signals.
// A file system that does not count inodes (Files is 0: btrfs, some
// overlays) has no inode signal.
func (s fsStat) observe(signals map[Signal]Observation, available, inodesFree Signal) {
	signals[available] = Observation{
		Available: *resource.NewQuantity(s.available, resource.BinarySI),
		Capacity:  *resource.NewQuantity(s.capacity, resource.BinarySI),
	}
	if s.inodes > 0 {
		signals[inodesFree] = Observation{
			Available: *resource.NewQuantity(s.inodesFree, resource.DecimalSI),
			Capacity:  *resource.NewQuantity(s.inodes, resource.DecimalSI),
		}
	}
}

// PodUsage measures each pod the runtime reports: memory and processes from
// its sandbox's stats (its containers' working sets added up when the
// runtime has no sandbox stats), each container's memory and writable
// layer from its stats, and from the node's disks its containers' logs and
// its local volumes.
func (o *NodeObserver) PodUsage(ctx context.Context) (map[string]PodUsage, error) {
	sandboxes, err := o.runtime.ListPodSandboxStats(ctx, nil)
	if err != nil && !errors.Is(err, crierr.ErrUnimplemented) {
		return nil, err
	}
	containers, err := o.runtime.ListContainerStats(ctx, nil)
	if err != nil {
		return nil, err
	}
	pods := map[string]*PodUsage{}
	podOf := func(uid string) *PodUsage {
		if pods[uid] == nil {
			pods[uid] = &PodUsage{}
		}
		return pods[uid]
	}
	sandboxMemory := map[string]bool{}
	for _, s := range sandboxes {
		uid := s.GetAttributes().GetLabels()[crilabels.LabelPodUID]
		if uid == "" {
			continue
		}
		p := podOf(uid)
		if ws := s.GetLinux().GetMemory().GetWorkingSetBytes(); ws != nil {
			p.MemoryWorkingSet += int64(ws.GetValue())
			sandboxMemory[uid] = true
		}
		p.Processes += int64(s.GetLinux().GetProcess().GetProcessCount().GetValue())
	}
	for _, c := range containers {
		labels := c.GetAttributes().GetLabels()
		uid := labels[crilabels.LabelPodUID]
		if uid == "" {
			continue
		}
		p := podOf(uid)
		usage := ContainerUsage{Name: labels[crilabels.LabelContainerName]}
		if ws := c.GetMemory().GetWorkingSetBytes(); ws != nil {
			n := int64(ws.GetValue())
			usage.MemoryWorkingSet = &n
			if !sandboxMemory[uid] {
				p.MemoryWorkingSet += n
			}
		}
		if layer := c.GetWritableLayer(); layer != nil {
			usage.WritableLayer = &DiskUsage{Bytes: int64(layer.GetUsedBytes().GetValue()), Inodes: int64(layer.GetInodesUsed().GetValue())}
		}
		p.Containers = append(p.Containers, usage)
	}
	if err := o.addDiskUsage(pods); err != nil {
		return nil, err
	}
	usage := make(map[string]PodUsage, len(pods))
	for uid, p := range pods {
		usage[uid] = *p
	}
	return usage, nil
}

// addDiskUsage adds each pod's logs (by container; a container that has
// logs but no stats, one that exited, is added with its logs only) and its
// local volumes.
func (o *NodeObserver) addDiskUsage(pods map[string]*PodUsage) error {
	entries, err := os.ReadDir(o.cfg.LogDir)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("pods' logs: %w", err)
	}
	logDirs := map[string]string{} // uid → <LogDir>/<namespace>_<name>_<uid>
	for _, e := range entries {
		if parts := strings.Split(e.Name(), "_"); len(parts) == 3 && e.IsDir() {
			logDirs[parts[2]] = filepath.Join(o.cfg.LogDir, e.Name())
		}
	}
	for uid, p := range pods {
		volumes, err := diskUsage(filepath.Join(o.cfg.DataDir, "pods", uid, "volumes"))
		if err != nil {
			return fmt.Errorf("volumes of pod %s: %w", uid, err)
		}
		p.Volumes = volumes
		dir, ok := logDirs[uid]
		if !ok {
			continue
		}
		containers, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("logs of pod %s: %w", uid, err)
		}
		for _, c := range containers {
			logs, err := diskUsage(filepath.Join(dir, c.Name()))
			if err != nil {
				return fmt.Errorf("logs of pod %s: %w", uid, err)
			}
			p.addLogs(c.Name(), logs)
		}
	}
	return nil
}

// addLogs gives the container named name its logs.
func (p *PodUsage) addLogs(name string, logs DiskUsage) {
	for i := range p.Containers {
		if p.Containers[i].Name == name {
			p.Containers[i].Logs = &logs
			return
		}
	}
	p.Containers = append(p.Containers, ContainerUsage{Name: name, Logs: &logs})
}

// diskUsage is what the tree at root uses of its file system (a pod's
// volumes, its logs), walked beneath root (internal/diskusage).
func diskUsage(root string) (DiskUsage, error) {
	u, err := diskusage.Measure(root)
	return DiskUsage{Bytes: u.Bytes, Inodes: u.Inodes}, err
}

func readInt64(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
