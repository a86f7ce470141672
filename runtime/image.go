package runtime

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PullImage pulls an image and returns its reference (usually the digest).
// Pulls take as long as they take: only ctx bounds it, not RequestTimeout
// (kubelet does the same).
func (c *Client) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	conn, err := c.connection("PullImage")
	if err != nil {
		return "", err
	}
	resp, err := call(ctx, c, conn, "PullImage", mutation, 0,
		&runtimeapi.PullImageRequest{Image: image, Auth: auth, SandboxConfig: sandboxConfig}, conn.image.PullImage)
	if err != nil {
		return "", err
	}
	return resp.ImageRef, nil
}

// ImageStatus returns the status of an image. An image that is not present
// is not an error: resp.Image is nil (this is the CRI contract).
func (c *Client) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	conn, err := c.connection("ImageStatus")
	if err != nil {
		return nil, err
	}
	return call(ctx, c, conn, "ImageStatus", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.ImageStatusRequest{Image: image, Verbose: verbose}, conn.image.ImageStatus)
}

// ListImages lists the images matching filter (nil: all).
func (c *Client) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	conn, err := c.connection("ListImages")
	if err != nil {
		return nil, err
	}
	resp, err := call(ctx, c, conn, "ListImages", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.ListImagesRequest{Filter: filter}, conn.image.ListImages)
	if err != nil {
		return nil, err
	}
	return resp.Images, nil
}

// RemoveImage removes an image. The CRI defines it as idempotent: an image
// that is already gone (NotFound) is success.
func (c *Client) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	conn, err := c.connection("RemoveImage")
	if err != nil {
		return err
	}
	_, err = call(ctx, c, conn, "RemoveImage", mutation, c.cfg.RequestTimeout,
		&runtimeapi.RemoveImageRequest{Image: image}, conn.image.RemoveImage)
	return c.idempotent("RemoveImage", image.GetImage(), err)
}

// ImageFsInfo returns usage of the filesystems holding images and containers.
func (c *Client) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	conn, err := c.connection("ImageFsInfo")
	if err != nil {
		return nil, err
	}
	return call(ctx, c, conn, "ImageFsInfo", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.ImageFsInfoRequest{}, conn.image.ImageFsInfo)
}
