package embedded

import (
	"context"
	"fmt"
	"os"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/embedded/network"
)

// RunPodSandbox creates a sandbox: a directory, a persisted record, unless
// the pod asks for the node's network a network namespace of its own
// attached to the pods' network (see loadNetwork), and the pod's shim,
// started in the pod's own namespaces (as far as this host grants them, see
// Isolation). A runtime that is not root makes no namespace: the pod shares
// the host's network and is reachable at 127.0.0.1.
func (r *Runtime) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil || md.GetName() == "" {
		return nil, errorf(crierr.ErrInvalidArgument, "sandbox config must have metadata with a name")
	}
	if err := checkSandboxSeccomp(cfg); err != nil {
		return nil, errorf(crierr.ErrInvalidArgument, "sandbox %q: %v", md.GetName(), err)
	}
	if err := checkCgroupParent(cfg.GetLinux().GetCgroupParent()); err != nil {
		return nil, errorf(crierr.ErrInvalidArgument, "sandbox %q: %v", md.GetName(), err)
	}
	userns, err := podUserns(cfg)
	if err == nil && userns != nil && r.usernsOff != nil {
		err = fmt.Errorf("user namespaces are not supported by this runtime: %w", r.usernsOff)
	}
	if err != nil {
		return nil, errorf(crierr.ErrInvalidArgument, "sandbox %q: %v", md.GetName(), err)
	}
	s := &sandbox{
		id:             newID(),
		name:           sandboxName(md),
		config:         cfg,
		runtimeHandler: req.GetRuntimeHandler(),
		createdAt:      nowNano(),
	}
	s.dir = r.sandboxDir(s.id)

	r.mu.Lock()
	err = r.reserveName(s.name, s.id)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	undo := func() {
		_ = r.stopPodShim(context.Background(), s)
		_ = unmountPodShm(s)
		_ = unmountPodUserns(s)
		r.undoNetwork(context.Background(), s)
		if s.cgroup != nil && !r.podCgroupShared(s) {
			r.deleteCgroup(s.cgroup, "sandbox", s.id)
		}
		_ = os.RemoveAll(s.dir)
		r.mu.Lock()
		delete(r.names, s.name)
		delete(r.creating, s.id)
		r.mu.Unlock()
	}
	if err := os.MkdirAll(s.dir, 0o711); err != nil {
		undo()
		return nil, errorf(crierr.ErrInternal, "create sandbox dir: %v", err)
	}
	// Recorded not ready first: a crash before the shim runs leaves a sandbox
	// that reports NOTREADY and is removed, never one without its shim (or
	// a cgroup of no sandbox).
	// The record names the network namespace too (setUpNetwork's first
	// record, saved once).
	s.cgroup = r.podCgroup(s)
	if userns == nil && r.wantsOwnNetwork(cfg) {
		s.netns = r.netnsPath(s)
	}
	r.mu.Lock()
	r.creating[s.id] = s // its cgroup is no orphan (removeOrphanedCgroups)
	r.mu.Unlock()
	if err := r.saveSandbox(s, false); err != nil {
		s.cgroup, s.netns = nil, "" // not made
		undo()
		return nil, errorf(crierr.ErrInternal, "record sandbox: %v", err)
	}
	switch {
	case userns != nil: // its network too, made in its user namespace
		if err := r.createPodUserns(ctx, s, userns); err != nil {
			undo()
			return nil, fmt.Errorf("start sandbox %s: %v", s.name, err)
		}
	case r.wantsOwnNetwork(cfg):
		if err := r.setUpNetwork(ctx, s, network.Create); err != nil {
			undo()
			return nil, fmt.Errorf("failed to set up network for sandbox %s: %v", s.id, err)
		}
	}
	if s.shimPID, err = r.startPodShim(ctx, s); err != nil {
		undo()
		return nil, fmt.Errorf("start sandbox %s: %v", s.name, err)
	}
	r.createPodCgroup(ctx, s)
	if err := r.saveSandbox(s, true); err != nil {
		undo()
		return nil, errorf(crierr.ErrInternal, "record sandbox: %v", err)
	}
	r.mu.Lock()
	s.ready = true
	r.sandboxes[s.id] = s
	r.sandboxesByPod.add(s.config.GetLabels(), s.id)
	delete(r.creating, s.id)
	r.mu.Unlock()
	r.watchSandbox(s)
	r.log.Info().Str("sandbox", s.id).Str("name", s.name).Int("shim_pid", s.shimPID).Strs("ips", s.ips).Msg("sandbox running")
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: s.id}, nil
}
