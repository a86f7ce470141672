package embedded

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/embedded/images"
	"github.com/jetlet/jetlet/schemas/imageref"
)

// The CRI image service of a runtime that runs images (a root runtime):
// each method of image*.go hands over to these when r.store is set. A
// runtime without root cannot give a container its image and runs host
// programs instead (image.go).

func (r *Runtime) storePull(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if strings.TrimSpace(ref) == "" {
		return nil, errorf(crierr.ErrInvalidArgument, "image reference is empty")
	}
	if _, err := imageref.Normalize(ref); err != nil {
		return nil, errorf(crierr.ErrInvalidArgument, "%w", err)
	}
	im, err := r.store.Pull(ctx, ref, pullAuth(req.GetAuth()))
	if err != nil {
		return nil, pullError(ctx, err)
	}
	return &runtimeapi.PullImageResponse{ImageRef: im.ID}, nil
}

// pullError is a failed pull's error: the context's own end as containerd
// reports it, else what the registry said (Unknown when it names no kind).
func pullError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, images.ErrNotFound):
		return errorf(crierr.ErrNotFound, "%w", err)
	case errors.Is(err, images.ErrUnauthorized):
		return errorf(crierr.ErrPermissionDenied, "%w", err)
	}
	return errorf(errUnknown, "%w", err)
}

func pullAuth(a *runtimeapi.AuthConfig) *images.Auth {
	if a == nil {
		return nil
	}
	return &images.Auth{
		Username: a.GetUsername(), Password: a.GetPassword(), Auth: a.GetAuth(),
		IdentityToken: a.GetIdentityToken(), RegistryToken: a.GetRegistryToken(),
	}
}

func (r *Runtime) storeImageStatus(req *runtimeapi.ImageStatusRequest) *runtimeapi.ImageStatusResponse {
	im := r.store.Lookup(req.GetImage().GetImage())
	if im == nil {
		return &runtimeapi.ImageStatusResponse{}
	}
	return &runtimeapi.ImageStatusResponse{Image: criImage(im)}
}

func (r *Runtime) storeListImages(filter *runtimeapi.ImageFilter) []*runtimeapi.Image {
	if ref := filter.GetImage().GetImage(); ref != "" {
		if im := r.store.Lookup(ref); im != nil {
			return []*runtimeapi.Image{criImage(im)}
		}
		return nil
	}
	var out []*runtimeapi.Image
	for _, im := range r.store.List() {
		out = append(out, criImage(im))
	}
	return out
}

// storeRemoveImage removes the image's record; the layers of an image a
// container uses stay until that container is removed (images.Store.Hold).
// Removing an unknown image succeeds, as the CRI asks: so does losing the
// race to a concurrent RemoveImage of the same image, which is why the
// lookup is Remove's own, under the store's lock.
func (r *Runtime) storeRemoveImage(req *runtimeapi.RemoveImageRequest) error {
	err := r.store.Remove(req.GetImage().GetImage())
	if err != nil && !errors.Is(err, images.ErrNotFound) {
		return errorf(crierr.ErrInternal, "%v", err)
	}
	return nil
}

// criImage is im as the CRI reports it: the user its USER names (a uid, or
// a name), as containerd reports them.
func criImage(im *images.Image) *runtimeapi.Image {
	out := &runtimeapi.Image{
		Id:          im.ID,
		RepoTags:    append([]string(nil), im.RepoTags...),
		RepoDigests: append([]string(nil), im.RepoDigests...),
		Size:        im.Size,
		Spec:        &runtimeapi.ImageSpec{Image: im.ID},
		Pinned:      im.Pinned,
	}
	userPart, _, _ := strings.Cut(im.Config.User, ":")
	if uid, err := strconv.ParseInt(userPart, 10, 64); err == nil {
		out.Uid = &runtimeapi.Int64Value{Value: uid}
	} else {
		out.Username = userPart
	}
	return out
}

// ErrNoImageStore is returned by ImportImages on a runtime that runs host
// programs (one that is not root): it has no images.
var ErrNoImageStore = errors.New("this runtime is not root and runs host programs: it has no image store")

// ImportImages loads the images of an OCI image-layout or `docker save`
// archive into the store, as `ctr images import` does: what `jetlet image
// import` calls, for hosts without a registry.
func (r *Runtime) ImportImages(ctx context.Context, archive io.Reader) ([]*images.Image, error) {
	if r.store == nil {
		return nil, ErrNoImageStore
	}
	return r.store.Import(ctx, archive)
}
