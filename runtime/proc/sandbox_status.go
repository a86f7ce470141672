package proc

import (
	"context"
	"encoding/json"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// loopbackIP is where a process of any sandbox is reachable: all share the
// host's network.
const loopbackIP = "127.0.0.1"

// PodSandboxStatus returns the sandbox's state, the namespace options its
// config asked for (none is applied) and 127.0.0.1 as its address.
func (r *Runtime) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	s, err := r.getSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	st := s.statusLocked()
	r.mu.RUnlock()
	resp := &runtimeapi.PodSandboxStatusResponse{
		Status:    st,
		Timestamp: nowNano(),
	}
	if req.GetVerbose() {
		info, _ := json.Marshal(map[string]any{
			"dir":    s.dir,
			"config": s.config,
			"note":   "jetlet-proc sandboxes have no process and no namespaces; containers run on the host",
		})
		resp.Info = map[string]string{"info": string(info)}
	}
	return resp, nil
}

// statusLocked is s's CRI status, as PodSandboxStatus reports it; r.mu must be
// held.
func (s *sandbox) statusLocked() *runtimeapi.PodSandboxStatus {
	nsOpts := s.config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if nsOpts == nil {
		nsOpts = &runtimeapi.NamespaceOption{}
	}
	return &runtimeapi.PodSandboxStatus{
		Id:             s.id,
		Metadata:       s.config.GetMetadata(),
		State:          s.stateLocked(),
		CreatedAt:      s.createdAt,
		Network:        &runtimeapi.PodSandboxNetworkStatus{Ip: loopbackIP},
		Linux:          &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: nsOpts}},
		Labels:         s.config.GetLabels(),
		Annotations:    s.config.GetAnnotations(),
		RuntimeHandler: s.runtimeHandler,
	}
}
