package embedded

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/schemas/imageref"
)

// PullImage pulls the image into the store (image_store.go). A runtime
// without root records the reference as one of its image's (see image):
// there is no registry, nothing is downloaded and credentials are ignored. A pull
// whose context has ended records nothing and fails with DeadlineExceeded or
// Canceled, as containerd's does.
func (r *Runtime) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	if r.store != nil {
		return r.storePull(ctx, req)
	}
	ref, err := imageref.Normalize(req.GetImage().GetImage())
	if err != nil {
		return nil, errorf(crierr.ErrInvalidArgument, "%w", err)
	}
	id := imageID(ref)
	size := hostImageSize(ref)
	r.mu.Lock()
	defer r.mu.Unlock()
	// Checked once the lock is held: waiting for it may have taken the
	// caller's whole deadline.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if r.recordPullLocked(ref, id, size) {
		if err := r.saveImagesLocked(); err != nil {
			// Back to what is stored.
			clear(r.images)
			r.loadImages()
			return nil, errorf(crierr.ErrInternal, "record image %s: %v", ref, err)
		}
	}
	return &runtimeapi.PullImageResponse{ImageRef: id}, nil
}
