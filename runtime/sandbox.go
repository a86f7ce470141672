package runtime

import (
	"context"
	"errors"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Version asks the runtime for its name, version and CRI API version.
func (c *Client) Version(ctx context.Context) (*runtimeapi.VersionResponse, error) {
	conn, err := c.connection("Version")
	if err != nil {
		return nil, err
	}
	return call(ctx, c, conn, "Version", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.VersionRequest{Version: APIVersion}, conn.runtime.Version)
}

// Status returns the runtime's conditions (RuntimeReady, NetworkReady).
func (c *Client) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	conn, err := c.connection("Status")
	if err != nil {
		return nil, err
	}
	return call(ctx, c, conn, "Status", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.StatusRequest{Verbose: verbose}, conn.runtime.Status)
}

// RuntimeConfig asks the runtime for its configuration: its cgroup driver
// (KEP-4033). A runtime without the call answers crierr.ErrUnimplemented.
func (c *Client) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	conn, err := c.connection("RuntimeConfig")
	if err != nil {
		return nil, err
	}
	return call(ctx, c, conn, "RuntimeConfig", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.RuntimeConfigRequest{}, conn.runtime.RuntimeConfig)
}

// RunPodSandbox creates and starts a pod sandbox and returns its id.
func (c *Client) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	conn, err := c.connection("RunPodSandbox")
	if err != nil {
		return "", err
	}
	resp, err := call(ctx, c, conn, "RunPodSandbox", mutation, c.cfg.RequestTimeout,
		&runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler}, conn.runtime.RunPodSandbox)
	if err != nil {
		return "", err
	}
	return resp.PodSandboxId, nil
}

// StopPodSandbox stops every container of the sandbox and the sandbox. A
// sandbox the runtime does not know is already stopped: NotFound is success.
func (c *Client) StopPodSandbox(ctx context.Context, id string) error {
	conn, err := c.connection("StopPodSandbox")
	if err != nil {
		return err
	}
	_, err = call(ctx, c, conn, "StopPodSandbox", mutation, c.cfg.RequestTimeout,
		&runtimeapi.StopPodSandboxRequest{PodSandboxId: id}, conn.runtime.StopPodSandbox)
	return c.idempotent("StopPodSandbox", id, err)
}

// RemovePodSandbox removes the sandbox and its containers. A sandbox the
// runtime does not know is already removed: NotFound is success.
func (c *Client) RemovePodSandbox(ctx context.Context, id string) error {
	conn, err := c.connection("RemovePodSandbox")
	if err != nil {
		return err
	}
	_, err = call(ctx, c, conn, "RemovePodSandbox", mutation, c.cfg.RequestTimeout,
		&runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}, conn.runtime.RemovePodSandbox)
	return c.idempotent("RemovePodSandbox", id, err)
}

// PodSandboxStatus returns the status of one sandbox (ErrNotFound if unknown).
func (c *Client) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	conn, err := c.connection("PodSandboxStatus")
	if err != nil {
		return nil, err
	}
	return call(ctx, c, conn, "PodSandboxStatus", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: verbose}, conn.runtime.PodSandboxStatus)
}

// ListPodSandbox lists the sandboxes matching filter (nil: all). A sandbox
// unchanged since an earlier list is the value that list returned (see
// listCodec): read it, never change it.
func (c *Client) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	conn, err := c.connection("ListPodSandbox")
	if err != nil {
		return nil, err
	}
	resp, err := call(ctx, c, conn, "ListPodSandbox", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.ListPodSandboxRequest{Filter: filter}, conn.runtime.ListPodSandbox)
	if err != nil {
		return nil, err
	}
	return resp.Items, nil
}

// idempotent turns NotFound from a stop or remove into success.
func (c *Client) idempotent(method, id string, err error) error {
	if errors.Is(err, ErrNotFound) {
		c.log.Debug().Str("method", method).Str("id", id).Msg("not found, treated as done")
		return nil
	}
	return err
}
