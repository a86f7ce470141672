package embedded

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/cgroups"
)

// ContainerStats reports the CPU, memory and swap use of the container's
// cgroup, with its pressure stall information where the kernel has it
// (cgroup v2). A container without a cgroup has its attributes only. CPU usage is
// cumulative; like kubelet's cache, the client derives a rate from two calls.
func (r *Runtime) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	c, err := r.getContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: r.containerStats(c)}, nil
}

// ListContainerStats reports ContainerStats of every running container that
// matches the filter's id, sandbox id (ids may be prefixes) and label
// selector, as containerd (only running containers have a task to measure).
func (r *Runtime) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	return &runtimeapi.ListContainerStatsResponse{Stats: r.listContainerStats(req.GetFilter())}, nil
}

func (r *Runtime) listContainerStats(f *runtimeapi.ContainerStatsFilter) []*runtimeapi.ContainerStats {
	out := []*runtimeapi.ContainerStats{}
	for _, item := range r.listContainers(&runtimeapi.ContainerFilter{
		Id:            f.GetId(),
		PodSandboxId:  f.GetPodSandboxId(),
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: f.GetLabelSelector(),
	}) {
		if c, err := r.getContainer(item.GetId()); err == nil {
			out = append(out, r.containerStats(c))
		}
	}
	return out
}

func (r *Runtime) containerStats(c *container) *runtimeapi.ContainerStats {
	out := &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{
		Id:          c.id,
		Metadata:    c.config.GetMetadata(),
		Labels:      c.config.GetLabels(),
		Annotations: c.config.GetAnnotations(),
	}}
	if c.cgroup == nil {
		return out
	}
	st, err := c.cgroup.Stats()
	if err != nil {
		r.log.Debug().Err(err).Str("container", c.id).Msg("no container cgroup stats")
		return out
	}
	now := nowNano()
	out.Cpu = cpuUsage(st, now)
	out.Memory = memoryUsage(st, now)
	out.Io = ioUsage(st, now)
	out.Swap = &runtimeapi.SwapUsage{Timestamp: now, SwapUsageBytes: &runtimeapi.UInt64Value{Value: st.SwapUsage}}
	if st.SwapLimit != 0 {
		out.Swap.SwapAvailableBytes = &runtimeapi.UInt64Value{Value: sub(st.SwapLimit, st.SwapUsage)}
	}
	return out
}

func cpuUsage(st *cgroups.Stats, now int64) *runtimeapi.CpuUsage {
	return &runtimeapi.CpuUsage{Timestamp: now, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: st.CPUUsageNanos}, Psi: st.CPUPressure}
}

// ioUsage is the cgroup's IO pressure; nil where the kernel reports none.
func ioUsage(st *cgroups.Stats, now int64) *runtimeapi.IoUsage {
	if st.IOPressure == nil {
		return nil
	}
	return &runtimeapi.IoUsage{Timestamp: now, Psi: st.IOPressure}
}

// memoryUsage reports, like containerd, the bytes available under the limit
// (none without one) after the working set.
func memoryUsage(st *cgroups.Stats, now int64) *runtimeapi.MemoryUsage {
	m := &runtimeapi.MemoryUsage{
		Timestamp:       now,
		WorkingSetBytes: &runtimeapi.UInt64Value{Value: st.WorkingSet},
		UsageBytes:      &runtimeapi.UInt64Value{Value: st.MemoryUsage},
		RssBytes:        &runtimeapi.UInt64Value{Value: st.RSS},
		PageFaults:      &runtimeapi.UInt64Value{Value: st.PageFaults},
		MajorPageFaults: &runtimeapi.UInt64Value{Value: st.MajorPageFaults},
		Psi:             st.MemoryPressure,
	}
	if st.MemoryLimit != 0 {
		m.AvailableBytes = &runtimeapi.UInt64Value{Value: sub(st.MemoryLimit, st.WorkingSet)}
	}
	return m
}

func sub(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}
