package embedded

import (
	"context"
	"encoding/json"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// loopbackIP is where a process of a sandbox put on the host's network for
// want of network namespaces (not root) is reachable.
const loopbackIP = "127.0.0.1"

// PodSandboxStatus returns the sandbox's state, the namespace options its
// config asked for (only the network's is applied) and its address: the
// CNI network's; none for a sandbox that asked for the node's network (the
// client gives it the node's, as with containerd) or that has only lo;
// 127.0.0.1 when pods share the host's network.
func (r *Runtime) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	s, err := r.getSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	st := s.statusLocked(r.net == nil)
	r.mu.RUnlock()
	resp := &runtimeapi.PodSandboxStatusResponse{
		Status:    st,
		Timestamp: nowNano(),
	}
	if req.GetVerbose() {
		r.mu.RLock()
		netns := s.netns
		r.mu.RUnlock()
		info, _ := json.Marshal(map[string]any{
			"dir":    s.dir,
			"config": s.config,
			"netns":  netns,
			"note":   "jetlet-proc sandboxes have no process; containers run on the host, in the sandbox's network namespace when it has one",
		})
		resp.Info = map[string]string{"info": string(info)}
	}
	return resp, nil
}

// statusLocked is s's CRI status, as PodSandboxStatus reports it; onHost
// says pods share the host's network. r.mu must be held.
func (s *sandbox) statusLocked(onHost bool) *runtimeapi.PodSandboxStatus {
	nsOpts := s.config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if nsOpts == nil {
		nsOpts = &runtimeapi.NamespaceOption{}
	}
	network := &runtimeapi.PodSandboxNetworkStatus{}
	switch {
	case nsOpts.GetNetwork() == runtimeapi.NamespaceMode_NODE:
	case onHost:
		network.Ip = loopbackIP
	case len(s.ips) > 0:
		network.Ip = s.ips[0]
		for _, ip := range s.ips[1:] {
			network.AdditionalIps = append(network.AdditionalIps, &runtimeapi.PodIP{Ip: ip})
		}
	}
	return &runtimeapi.PodSandboxStatus{
		Id:             s.id,
		Metadata:       s.config.GetMetadata(),
		State:          s.stateLocked(),
		CreatedAt:      s.createdAt,
		Network:        network,
		Linux:          &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: nsOpts}},
		Labels:         s.config.GetLabels(),
		Annotations:    s.config.GetAnnotations(),
		RuntimeHandler: s.runtimeHandler,
	}
}
