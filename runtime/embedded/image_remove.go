package embedded

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// RemoveImage forgets an image. Removing an unknown image succeeds.
func (r *Runtime) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	if r.store != nil {
		if err := r.storeRemoveImage(req); err != nil {
			return nil, err
		}
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	im := r.lookupImage(req.GetImage().GetImage())
	if im == nil {
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	delete(r.images, im.ID)
	if err := r.saveImagesLocked(); err != nil {
		r.images[im.ID] = im
		return nil, errorf(crierr.ErrInternal, "remove image %s: %v", im.ID, err)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}
