package imagegc

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageGCRuntime is the part of the CRI image collection uses, with
// exactly *runtime.Client's signatures (as reconcile declares its roles).
type ImageGCRuntime interface {
	// ListImages lists the images matching filter (nil: all).
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	// RemoveImage is idempotent: an image already gone is success.
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
	// ImageFsInfo names the file system holding the images (its
	// mountpoint) and what the runtime uses of it; the CRI reports no
	// capacity.
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
	// ListContainers lists the containers matching filter (nil: all, in
	// any state): the images they use are in use.
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}
