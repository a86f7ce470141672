package proc

import (
	"context"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RunPodSandbox creates a sandbox: a directory and a persisted record. There
// is no pause process. With CNI configured, a sandbox that does not ask for
// the node's network gets a network namespace of its own, attached to the CNI
// network; otherwise its containers run on the host's network and the
// sandbox is reachable at 127.0.0.1.
func (r *Runtime) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	cfg := req.GetConfig()
	md := cfg.GetMetadata()
	if md == nil || md.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "sandbox config must have metadata with a name")
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
	err := r.reserveName(s.name, s.id)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	release := func() {
		r.mu.Lock()
		delete(r.names, s.name)
		r.mu.Unlock()
	}
	if err := os.MkdirAll(s.dir, 0o711); err != nil {
		release()
		return nil, status.Errorf(codes.Internal, "create sandbox dir: %v", err)
	}
	if r.wantsOwnNetwork(cfg) {
		if err := r.setUpNetwork(ctx, s); err != nil {
			release()
			_ = os.RemoveAll(s.dir)
			return nil, status.Errorf(codes.Unknown, "failed to set up network for sandbox %s: %v", s.id, err)
		}
	}
	if err := r.saveSandbox(s, true); err != nil {
		r.undoNetwork(ctx, s)
		release()
		_ = os.RemoveAll(s.dir)
		return nil, status.Errorf(codes.Internal, "record sandbox: %v", err)
	}
	r.mu.Lock()
	s.ready = true
	r.sandboxes[s.id] = s
	r.mu.Unlock()
	r.log.Info().Str("sandbox", s.id).Str("name", s.name).Strs("ips", s.ips).Msg("sandbox running")
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: s.id}, nil
}
