package embedded

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// StopPodSandbox kills every container of the sandbox (no grace period, as
// containerd: the client stops containers gracefully first), then the pod's
// shim, releases its network (CNI DEL, namespace removed) and marks the
// sandbox NOTREADY. Stopping an unknown or stopped sandbox succeeds.
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
	if err := r.stopPodShim(ctx, s); err != nil {
		return errorf(crierr.ErrInternal, "stop the shim of sandbox %s: %v", s.id, err)
	}
	if err := unmountPodShm(s); err != nil {
		return errorf(crierr.ErrInternal, "stop sandbox %s: %v", s.id, err)
	}
	if err := unmountPodUserns(s); err != nil {
		return errorf(crierr.ErrInternal, "stop sandbox %s: %v", s.id, err)
	}
	r.mu.RLock()
	ready, netns := s.ready, s.netns
	r.mu.RUnlock()
	if !ready && netns == "" {
		return nil
	}
	if err := r.tearDownNetwork(ctx, s); err != nil {
		return fmt.Errorf("failed to destroy network for sandbox %s: %v", s.id, err)
	}
	if err := r.saveSandbox(s, false); err != nil {
		return errorf(crierr.ErrInternal, "record sandbox stop: %v", err)
	}
	r.mu.Lock()
	s.ready = false
	r.mu.Unlock()
	r.log.Info().Str("sandbox", s.id).Msg("sandbox stopped")
	return nil
}

// watchSandbox marks s NOTREADY, in the background, when its shim ends while
// the sandbox is meant to run (the shim was killed or crashed: its pod's
// processes died with it), as a sandbox whose pause container died.
func (r *Runtime) watchSandbox(s *sandbox) {
	go func() {
		<-r.locks.released(filepath.Join(s.dir, "shim.lock"))
		s.opMu.Lock()
		defer s.opMu.Unlock()
		r.mu.RLock()
		ready, present := s.ready, r.sandboxes[s.id] == s
		r.mu.RUnlock()
		if !ready || !present {
			return
		}
		r.log.Warn().Str("sandbox", s.id).Str("shim_log", logTail(filepath.Join(s.dir, "shim.log"), 1024)).
			Msg("the pod's shim ended: sandbox not ready")
		if err := r.saveSandbox(s, false); err != nil {
			r.log.Error().Err(err).Str("sandbox", s.id).Msg("record sandbox not ready")
		}
		r.mu.Lock()
		s.ready = false
		r.mu.Unlock()
	}()
}

// logTail is the last n bytes of the file at path, for a log message.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	data, _ := io.ReadAll(io.LimitReader(f, n))
	return string(data)
}
