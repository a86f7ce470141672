package proc

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const noStats = "jetlet-proc does not collect resource usage statistics"

// PodSandboxStats is not implemented: jetlet-proc keeps no cgroups to read.
func (r *Runtime) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	return nil, status.Error(codes.Unimplemented, noStats)
}

// ListPodSandboxStats is not implemented, see PodSandboxStats.
func (r *Runtime) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return nil, status.Error(codes.Unimplemented, noStats)
}

// UpdatePodSandboxResources is accepted and ignored: there is no pod cgroup.
func (r *Runtime) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	if _, err := r.getSandbox(req.GetPodSandboxId()); err != nil {
		return nil, err
	}
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}
