package embedded

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// ReopenContainerLog makes the container's shim close its log file and open
// the log path again (after a rotation renamed it). It returns once the shim
// has done so. The container must be running.
func (r *Runtime) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	c, err := r.getContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	r.mu.RLock()
	state := c.stateLocked()
	r.mu.RUnlock()
	if state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, errorf(crierr.ErrFailedPrecondition, "container %s is not running", c.id)
	}
	if err := r.reopenLog(ctx, c); err != nil {
		return nil, errorf(crierr.ErrInternal, "reopen log of container %s: %v", c.id, err)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}
