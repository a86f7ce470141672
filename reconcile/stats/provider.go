// Package stats is kubelet's summary provider: the node's and its pods'
// usage in the Summary API's shape (k8s.io/kubelet/pkg/apis/stats/v1alpha1,
// what kubelet serves at /stats/summary to metrics-server and kubectl top),
// from the CRI's ListPodSandboxStats and ListContainerStats and the node's
// /proc and root cgroup.
package stats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/crilabels"
)

// Runtime reports pods' and containers' usage, and when each was created,
// with *runtime.Client's signatures.
type Runtime interface {
	ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error)
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// DefaultMaxWindow is the longest window a CPU rate is averaged over: a
// sample older than that gives no rate (the next Summary has one).
const DefaultMaxWindow = time.Minute

// Config configures a Provider. Node is required.
type Config struct {
	Node string
	// ProcDir and CgroupDir are where procfs and the cgroup file systems are
	// mounted: /proc and /sys/fs/cgroup by default.
	ProcDir, CgroupDir string
	// MaxWindow: 0 is DefaultMaxWindow.
	MaxWindow time.Duration
	// MinWindow is the shortest window a CPU rate is taken over: asked
	// again sooner, a counter's rate is the one taken last. 0: none.
	MinWindow time.Duration
}

// ErrInvalidConfig wraps every refusal of a configuration.
var ErrInvalidConfig = errors.New("invalid stats config")

// Provider measures the node and its pods. A CPU rate (usageNanoCores) is
// the counter's growth since the same Provider's previous Summary, as
// kubelet's CRI stats provider keeps the last sample of each container: two
// readers that must not shorten each other's windows (the node record's
// heartbeat and the node service) each have their own Provider.
type Provider struct {
	rt  Runtime
	cfg Config
	// mu serialises Summaries: it guards rates, read and written by each.
	mu    sync.Mutex
	rates cpuRates
}

// New returns a Provider of the node cfg names. It does no I/O.
func New(rt Runtime, cfg Config) (*Provider, error) {
	if rt == nil {
		return nil, fmt.Errorf("%w: the stats provider needs a runtime", ErrInvalidConfig)
	}
	if cfg.Node == "" {
		return nil, fmt.Errorf("%w: the stats provider needs the node's name", ErrInvalidConfig)
	}
	if cfg.MaxWindow < 0 || cfg.MinWindow < 0 {
		return nil, fmt.Errorf("%w: negative max or min window %v, %v", ErrInvalidConfig, cfg.MaxWindow, cfg.MinWindow)
	}
	if cfg.ProcDir == "" {
		cfg.ProcDir = "/proc"
	}
	if cfg.CgroupDir == "" {
		cfg.CgroupDir = "/sys/fs/cgroup"
	}
	if cfg.MaxWindow == 0 {
		cfg.MaxWindow = DefaultMaxWindow
	}
	if cfg.MinWindow >= cfg.MaxWindow {
		return nil, fmt.Errorf("%w: min window %v is not below the max window %v", ErrInvalidConfig, cfg.MinWindow, cfg.MaxWindow)
	}
	return &Provider{rt: rt, cfg: cfg, rates: cpuRates{minWindow: cfg.MinWindow, maxWindow: cfg.MaxWindow}}, nil
}

// Summary measures the node and every pod the runtime reports. A pod's
// containers are those of ListContainerStats (the running ones), its own
// figures its sandbox's (its pod cgroup's, the containers' included); a
// runtime without sandbox stats leaves those out.
func (p *Provider) Summary(ctx context.Context) (*statsapi.Summary, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	sandboxes, err := p.rt.ListPodSandboxStats(ctx, nil)
	if err != nil && !errors.Is(err, crierr.ErrUnimplemented) {
		return nil, err
	}
	containers, err := p.rt.ListContainerStats(ctx, nil)
	if err != nil {
		return nil, err
	}
	created, err := p.createdAt(ctx)
	if err != nil {
		return nil, err
	}
	node, err := p.node()
	if err != nil {
		return nil, err
	}
	pods := map[string]*statsapi.PodStats{}
	var order []string
	podOf := func(labels map[string]string) *statsapi.PodStats {
		uid := labels[crilabels.LabelPodUID]
		if uid == "" {
			return nil
		}
		if pods[uid] == nil {
			pods[uid] = &statsapi.PodStats{
				PodRef:     statsapi.PodReference{Name: labels[crilabels.LabelPodName], Namespace: labels[crilabels.LabelPodNamespace], UID: uid},
				Containers: []statsapi.ContainerStats{},
			}
			order = append(order, uid)
		}
		return pods[uid]
	}
	for _, s := range sandboxes {
		pod := podOf(s.GetAttributes().GetLabels())
		if pod == nil {
			continue
		}
		linux := s.GetLinux()
		pod.StartTime = created[s.GetAttributes().GetId()]
		pod.CPU = p.cpuStats("pod/"+s.GetAttributes().GetId(), linux.GetCpu())
		pod.Memory = memoryStats(linux.GetMemory())
		pod.IO = ioStats(linux.GetIo())
		if n := linux.GetProcess().GetProcessCount(); n != nil {
			pod.ProcessStats = &statsapi.ProcessStats{ProcessCount: new(n.GetValue())}
		}
	}
	for _, c := range containers {
		labels := c.GetAttributes().GetLabels()
		pod := podOf(labels)
		if pod == nil {
			continue
		}
		pod.Containers = append(pod.Containers, statsapi.ContainerStats{
			Name:      labels[crilabels.LabelContainerName],
			StartTime: created[c.GetAttributes().GetId()],
			CPU:       p.cpuStats("container/"+c.GetAttributes().GetId(), c.GetCpu()),
			Memory:    memoryStats(c.GetMemory()),
			IO:        ioStats(c.GetIo()),
			Swap:      swapStats(c.GetSwap()),
		})
	}
	p.rates.done()
	out := &statsapi.Summary{Node: node, Pods: make([]statsapi.PodStats, 0, len(order))}
	for _, uid := range order {
		out.Pods = append(out.Pods, *pods[uid])
	}
	return out, nil
}

// createdAt is when each sandbox and container (by id) was created: the
// start time of its stats, as kubelet's CRI stats provider gives it
// (metrics-server takes a container whose start time changed for a new
// one, and starts its CPU rate over).
func (p *Provider) createdAt(ctx context.Context) (map[string]metav1.Time, error) {
	sandboxes, err := p.rt.ListPodSandbox(ctx, nil)
	if err != nil {
		return nil, err
	}
	containers, err := p.rt.ListContainers(ctx, nil)
	if err != nil {
		return nil, err
	}
	created := make(map[string]metav1.Time, len(sandboxes)+len(containers))
	for _, s := range sandboxes {
		created[s.GetId()] = metav1.NewTime(time.Unix(0, s.GetCreatedAt()))
	}
	for _, c := range containers {
		created[c.GetId()] = metav1.NewTime(time.Unix(0, c.GetCreatedAt()))
	}
	return created, nil
}

// Node measures the node alone, asking the runtime nothing (the node
// record's usage, each heartbeat). It forgets the pods' and containers'
// samples: a Provider serves Summaries or Nodes, not both.
func (p *Provider) Node() (statsapi.NodeStats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.rates.done()
	return p.node()
}

// node measures the node: its CPU from /proc/stat, its memory from
// meminfo and the root cgroup, the pressure on both and on IO from
// /proc/pressure (the whole machine's, the root cgroup's under v2).
func (p *Provider) node() (statsapi.NodeStats, error) {
	usage, boot, err := nodeCPU(p.cfg.ProcDir)
	if err != nil {
		return statsapi.NodeStats{}, fmt.Errorf("node cpu: %w", err)
	}
	now := time.Now()
	mem, err := ReadNodeMemory(p.cfg.ProcDir, p.cfg.CgroupDir)
	if err != nil {
		return statsapi.NodeStats{}, fmt.Errorf("node %w", err)
	}
	var psi [3]*statsapi.PSIStats
	for i, resource := range []string{"cpu", "memory", "io"} {
		if psi[i], err = nodePressure(p.cfg.ProcDir, resource); err != nil {
			return statsapi.NodeStats{}, fmt.Errorf("node pressure: %w", err)
		}
	}
	at := metav1.NewTime(now)
	n := statsapi.NodeStats{
		NodeName:  p.cfg.Node,
		StartTime: metav1.NewTime(boot),
		CPU: &statsapi.CPUStats{
			Time:                 at,
			UsageCoreNanoSeconds: new(usage),
			UsageNanoCores:       p.rates.rate("node", cpuSample{at: now.UnixNano(), usage: usage}),
			PSI:                  psi[0],
		},
		Memory: &statsapi.MemoryStats{
			Time:            at,
			AvailableBytes:  new(uint64(max(mem.Capacity-mem.WorkingSet, 0))),
			UsageBytes:      new(uint64(mem.Usage)),
			WorkingSetBytes: new(uint64(mem.WorkingSet)),
			PSI:             psi[1],
		},
	}
	if psi[2] != nil {
		n.IO = &statsapi.IOStats{Time: at, PSI: psi[2]}
	}
	return n, nil
}

// cpuStats is the CRI's CPU usage with its rate since the counter's
// previous sample (key's); nil without a counter.
func (p *Provider) cpuStats(key string, c *runtimeapi.CpuUsage) *statsapi.CPUStats {
	if c.GetUsageCoreNanoSeconds() == nil {
		return nil
	}
	usage := c.GetUsageCoreNanoSeconds().GetValue()
	return &statsapi.CPUStats{
		Time:                 metav1.NewTime(time.Unix(0, c.GetTimestamp())),
		UsageCoreNanoSeconds: new(usage),
		UsageNanoCores:       p.rates.rate(key, cpuSample{at: c.GetTimestamp(), usage: usage}),
		PSI:                  psiStats(c.GetPsi()),
	}
}

func memoryStats(m *runtimeapi.MemoryUsage) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	return &statsapi.MemoryStats{
		Time:            metav1.NewTime(time.Unix(0, m.GetTimestamp())),
		AvailableBytes:  value(m.GetAvailableBytes()),
		UsageBytes:      value(m.GetUsageBytes()),
		WorkingSetBytes: value(m.GetWorkingSetBytes()),
		RSSBytes:        value(m.GetRssBytes()),
		PageFaults:      value(m.GetPageFaults()),
		MajorPageFaults: value(m.GetMajorPageFaults()),
		PSI:             psiStats(m.GetPsi()),
	}
}

func ioStats(io *runtimeapi.IoUsage) *statsapi.IOStats {
	if io == nil {
		return nil
	}
	return &statsapi.IOStats{Time: metav1.NewTime(time.Unix(0, io.GetTimestamp())), PSI: psiStats(io.GetPsi())}
}

func swapStats(s *runtimeapi.SwapUsage) *statsapi.SwapStats {
	if s == nil {
		return nil
	}
	return &statsapi.SwapStats{
		Time:               metav1.NewTime(time.Unix(0, s.GetTimestamp())),
		SwapAvailableBytes: value(s.GetSwapAvailableBytes()),
		SwapUsageBytes:     value(s.GetSwapUsageBytes()),
	}
}

func psiStats(p *runtimeapi.PsiStats) *statsapi.PSIStats {
	if p == nil {
		return nil
	}
	data := func(d *runtimeapi.PsiData) statsapi.PSIData {
		return statsapi.PSIData{Total: d.GetTotal(), Avg10: d.GetAvg10(), Avg60: d.GetAvg60(), Avg300: d.GetAvg300()}
	}
	return &statsapi.PSIStats{Full: data(p.GetFull()), Some: data(p.GetSome())}
}

// value is a CRI value as the Summary's optional number.
func value(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	return new(v.GetValue())
}
