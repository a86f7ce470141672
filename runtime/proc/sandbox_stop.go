package proc

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StopPodSandbox kills every container of the sandbox (no grace period, as
// containerd: the client stops containers gracefully first), releases its
// network (CNI DEL, namespace removed) and marks the sandbox NOTREADY.
// Stopping an unknown or stopped sandbox succeeds.
func (r *Runtime) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	s, err := r.getSandbox(req.GetPodSandboxId())
	if err != nil {
		if isNotFound(err) {
			return &runtimeapi.StopPodSandboxResponse{}, nil
		}
		return nil, err
	}
	if err := r.stopSandbox(ctx, s); err != nil {
		return nil, err
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *Runtime) stopSandbox(ctx context.Context, s *sandbox) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	for _, c := range r.containersOf(s.id) {
		if err := r.stopContainer(ctx, c, 0); err != nil {
			return err
		}
	}
	r.mu.RLock()
	ready, netns := s.ready, s.netns
	r.mu.RUnlock()
	if !ready && netns == "" {
		return nil
	}
	if err := r.tearDownNetwork(ctx, s); err != nil {
		return status.Errorf(codes.Unknown, "failed to destroy network for sandbox %s: %v", s.id, err)
	}
	if err := r.saveSandbox(s, false); err != nil {
		return status.Errorf(codes.Internal, "record sandbox stop: %v", err)
	}
	r.mu.Lock()
	s.ready = false
	r.mu.Unlock()
	r.log.Info().Str("sandbox", s.id).Msg("sandbox stopped")
	return nil
}
