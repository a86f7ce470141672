package embedded

import (
	"context"
	"sort"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListPodSandbox lists sandboxes matching the filter's id (or id prefix),
// state and label selector.
func (r *Runtime) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: r.listSandboxes(req.GetFilter())}, nil
}

// StreamPodSandboxes sends the same list as ListPodSandbox in chunks.
func (r *Runtime) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxesResponse]) error {
	for _, chunk := range chunks(r.listSandboxes(req.GetFilter())) {
		if err := stream.Send(&runtimeapi.StreamPodSandboxesResponse{PodSandboxes: chunk}); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runtime) listSandboxes(f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := candidates(r.sandboxesByPod, r.sandboxes, f.GetLabelSelector())
	if id := f.GetId(); id != "" {
		full, err := resolveID(r.sandboxes, id, "sandbox")
		if err != nil {
			return nil
		}
		ids = map[string]*sandbox{full: r.sandboxes[full]}
	}
	out := []*runtimeapi.PodSandbox{}
	for _, s := range ids {
		st := s.stateLocked()
		if f.GetState() != nil && f.GetState().GetState() != st {
			continue
		}
		if !matchLabels(f.GetLabelSelector(), s.config.GetLabels()) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{
			Id:             s.id,
			Metadata:       s.config.GetMetadata(),
			State:          st,
			CreatedAt:      s.createdAt,
			Labels:         s.config.GetLabels(),
			Annotations:    s.config.GetAnnotations(),
			RuntimeHandler: s.runtimeHandler,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt > out[j].CreatedAt })
	return out
}
