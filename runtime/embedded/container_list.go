package embedded

import (
	"context"
	"sort"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListContainers lists containers matching the filter's id, state, sandbox id
// (ids may be prefixes) and label selector.
func (r *Runtime) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: r.listContainers(req.GetFilter())}, nil
}

// StreamContainers sends the same list as ListContainers in chunks.
func (r *Runtime) StreamContainers(req *runtimeapi.StreamContainersRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
	for _, chunk := range chunks(r.listContainers(req.GetFilter())) {
		if err := stream.Send(&runtimeapi.StreamContainersResponse{Containers: chunk}); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runtime) listContainers(f *runtimeapi.ContainerFilter) []*runtimeapi.Container {
	r.mu.RLock()
	defer r.mu.RUnlock()
	cands := candidates(r.containersByPod, r.containers, f.GetLabelSelector())
	if id := f.GetId(); id != "" {
		full, err := resolveID(r.containers, id, "container")
		if err != nil {
			return []*runtimeapi.Container{}
		}
		cands = map[string]*container{full: r.containers[full]}
	}
	sandboxID := ""
	if id := f.GetPodSandboxId(); id != "" {
		full, err := resolveID(r.sandboxes, id, "sandbox")
		if err != nil {
			return []*runtimeapi.Container{}
		}
		sandboxID = full
	}
	out := []*runtimeapi.Container{}
	for _, c := range cands {
		st := c.stateLocked()
		switch {
		case f.GetState() != nil && f.GetState().GetState() != st:
			continue
		case sandboxID != "" && c.sandboxID != sandboxID:
			continue
		case !matchLabels(f.GetLabelSelector(), c.config.GetLabels()):
			continue
		}
		out = append(out, &runtimeapi.Container{
			Id:           c.id,
			PodSandboxId: c.sandboxID,
			Metadata:     c.config.GetMetadata(),
			Image:        c.config.GetImage(),
			ImageRef:     c.imageID,
			ImageId:      c.imageID,
			State:        st,
			CreatedAt:    c.createdAt,
			Labels:       c.config.GetLabels(),
			Annotations:  c.config.GetAnnotations(),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt > out[j].CreatedAt })
	return out
}
