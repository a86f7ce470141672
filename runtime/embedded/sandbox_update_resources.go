package embedded

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UpdatePodSandboxResources applies the pod's resources to its cgroup; the
// overhead is not applied separately (it is part of the pod's resources).
func (r *Runtime) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	s, err := r.getSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if req.GetResources() != nil {
		if err := applyResources(s.cgroup, req.GetResources()); err != nil {
			return nil, err
		}
	}
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}
