package embedded

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// RemovePodSandbox stops the sandbox if it is ready, removes its containers and
// then its directory and record. Removing an unknown sandbox succeeds.
func (r *Runtime) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	s, err := r.getSandbox(req.GetPodSandboxId())
	if err != nil {
		if isNotFound(err) {
			return &runtimeapi.RemovePodSandboxResponse{}, nil
		}
		return nil, err
	}
	if err := r.stopSandbox(ctx, s); err != nil {
		return nil, err
	}
	s.opMu.Lock()
	defer s.opMu.Unlock()
	for _, c := range r.containersOf(s.id) {
		if err := r.removeContainer(ctx, c); err != nil {
			return nil, err
		}
	}
	r.mu.RLock()
	_, present := r.sandboxes[s.id]
	r.mu.RUnlock()
	if !present {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if s.cgroup != nil && !r.podCgroupShared(s) {
		r.deleteCgroup(s.cgroup, "sandbox", s.id)
	}
	if err := removeDirAtomic(s.dir); err != nil {
		return nil, errorf(crierr.ErrInternal, "remove sandbox dir: %v", err)
	}
	r.mu.Lock()
	delete(r.sandboxes, s.id)
	r.sandboxesByPod.remove(s.config.GetLabels(), s.id)
	if r.names[s.name] == s.id {
		delete(r.names, s.name)
	}
	r.mu.Unlock()
	r.lists.forgetSandbox(s.id)
	r.log.Info().Str("sandbox", s.id).Msg("sandbox removed")
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}
