package proc

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UpdateContainerResources records the new resources (ContainerStatus reports
// them) without enforcing them: jetlet-proc applies no resource limits.
func (r *Runtime) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	c, err := r.getContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if req.GetLinux() == nil {
		return &runtimeapi.UpdateContainerResourcesResponse{}, nil
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	r.mu.Lock()
	old := c.resources
	c.resources = req.GetLinux()
	r.mu.Unlock()
	if err := r.saveContainer(c); err != nil {
		r.mu.Lock()
		c.resources = old
		r.mu.Unlock()
		return nil, status.Errorf(codes.Internal, "record resources: %v", err)
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}
