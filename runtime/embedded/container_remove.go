package embedded

import (
	"context"
	"os"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/runtime/crierr"
)

// RemoveContainer kills the container if it runs, then removes its record and
// directory (and, with LinkMountsOnHost, the links it made on the host). The
// CRI log file stays. Removing an unknown container succeeds.
func (r *Runtime) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	c, err := r.getContainer(req.GetContainerId())
	if err != nil {
		if isNotFound(err) {
			return &runtimeapi.RemoveContainerResponse{}, nil
		}
		return nil, err
	}
	if err := r.removeContainer(ctx, c); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *Runtime) removeContainer(ctx context.Context, c *container) error {
	if err := r.stopContainer(ctx, c, 0); err != nil {
		return err
	}
	c.opMu.Lock()
	defer c.opMu.Unlock()
	r.mu.RLock()
	_, present := r.containers[c.id]
	r.mu.RUnlock()
	if !present {
		return nil
	}
	var links []string
	if err := atomicfile.ReadJSON(filepath.Join(c.dir, "hostlinks.json"), &links); err == nil {
		for _, l := range links {
			if _, err := os.Readlink(l); err == nil {
				_ = os.Remove(l)
			}
		}
	}
	r.deleteCgroup(c.cgroup, "container", c.id)
	if err := removeDirAtomic(c.dir); err != nil {
		return errorf(crierr.ErrInternal, "remove container dir: %v", err)
	}
	r.releaseImages(c.id, c.images)
	r.mu.Lock()
	delete(r.containers, c.id)
	r.containersByPod.remove(c.config.GetLabels(), c.id)
	if r.names[c.name] == c.id {
		delete(r.names, c.name)
	}
	r.emitLocked(c, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	r.mu.Unlock()
	r.lists.forgetContainer(c.id)
	r.log.Info().Str("container", c.id).Msg("container removed")
	return nil
}
