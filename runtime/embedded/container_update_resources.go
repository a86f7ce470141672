package embedded

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// UpdateContainerResources applies the new resources to the container's
// cgroup at once, then records them (ContainerStatus reports them). Without a
// cgroup they are only recorded. Resources the host cannot apply fail the
// call and change nothing that was recorded.
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
	if err := applyResources(c.cgroup, req.GetLinux()); err != nil {
		return nil, err
	}
	r.mu.Lock()
	old := c.resources
	c.resources = req.GetLinux()
	r.mu.Unlock()
	if err := r.saveContainer(c); err != nil {
		r.mu.Lock()
		c.resources = old
		r.mu.Unlock()
		return nil, errorf(crierr.ErrInternal, "record resources: %v", err)
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}
