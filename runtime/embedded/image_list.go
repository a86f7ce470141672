package embedded

import (
	"context"
	"sort"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListImages lists the pulled references, optionally only the one the filter
// names.
func (r *Runtime) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: r.listImages(req.GetFilter())}, nil
}

// StreamImages sends the same list as ListImages in chunks.
func (r *Runtime) StreamImages(req *runtimeapi.StreamImagesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamImagesResponse]) error {
	list := r.listImages(req.GetFilter())
	for _, chunk := range chunks(list) {
		if err := stream.Send(&runtimeapi.StreamImagesResponse{Images: chunk}); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runtime) listImages(filter *runtimeapi.ImageFilter) []*runtimeapi.Image {
	if r.store != nil {
		return r.storeListImages(filter)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*runtimeapi.Image
	if ref := filter.GetImage().GetImage(); ref != "" {
		if im := r.lookupImage(ref); im != nil {
			out = append(out, im.cri())
		}
		return out
	}
	for _, im := range r.images {
		out = append(out, im.cri())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return out
}

// streamChunk is how many items one streamed response carries.
const streamChunk = 500

func chunks[T any](list []T) [][]T {
	var out [][]T
	for len(list) > streamChunk {
		out = append(out, list[:streamChunk])
		list = list[streamChunk:]
	}
	return append(out, list)
}
