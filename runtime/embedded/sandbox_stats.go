package embedded

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodSandboxStats reports the pod cgroup's CPU, memory and process count
// (its containers included) and the stats of each running container. A
// sandbox without a cgroup has its attributes only.
func (r *Runtime) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	s, err := r.getSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: r.sandboxStats(s)}, nil
}

// ListPodSandboxStats reports PodSandboxStats of every ready sandbox that
// matches the filter's id (or id prefix) and label selector.
func (r *Runtime) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	f := req.GetFilter()
	resp := &runtimeapi.ListPodSandboxStatsResponse{}
	for _, item := range r.listSandboxes(&runtimeapi.PodSandboxFilter{
		Id:            f.GetId(),
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: f.GetLabelSelector(),
	}) {
		if s, err := r.getSandbox(item.GetId()); err == nil {
			resp.Stats = append(resp.Stats, r.sandboxStats(s))
		}
	}
	return resp, nil
}

func (r *Runtime) sandboxStats(s *sandbox) *runtimeapi.PodSandboxStats {
	out := &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{
			Id:          s.id,
			Metadata:    s.config.GetMetadata(),
			Labels:      s.config.GetLabels(),
			Annotations: s.config.GetAnnotations(),
		},
		Linux: &runtimeapi.LinuxPodSandboxStats{},
	}
	if s.cgroup != nil {
		if st, err := s.cgroup.Stats(); err != nil {
			r.log.Debug().Err(err).Str("sandbox", s.id).Msg("no pod cgroup stats")
		} else {
			now := nowNano()
			out.Linux.Cpu = cpuUsage(st, now)
			out.Linux.Memory = memoryUsage(st, now)
			out.Linux.Io = ioUsage(st, now)
			out.Linux.Process = &runtimeapi.ProcessUsage{Timestamp: now, ProcessCount: &runtimeapi.UInt64Value{Value: st.Processes}}
		}
	}
	out.Linux.Containers = r.listContainerStats(&runtimeapi.ContainerStatsFilter{PodSandboxId: s.id})
	return out
}
