package runtime

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CreateContainer creates a container in a sandbox and returns its id.
// sandboxConfig is the config the sandbox was run with.
func (c *Client) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	conn, err := c.connection("CreateContainer")
	if err != nil {
		return "", err
	}
	resp, err := call(ctx, c, conn, "CreateContainer", mutation, c.cfg.RequestTimeout,
		&runtimeapi.CreateContainerRequest{PodSandboxId: podSandboxID, Config: config, SandboxConfig: sandboxConfig},
		conn.runtime.CreateContainer)
	if err != nil {
		return "", err
	}
	return resp.ContainerId, nil
}

// StartContainer starts a created container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	conn, err := c.connection("StartContainer")
	if err != nil {
		return err
	}
	_, err = call(ctx, c, conn, "StartContainer", mutation, c.cfg.RequestTimeout,
		&runtimeapi.StartContainerRequest{ContainerId: id}, conn.runtime.StartContainer)
	return err
}

// StopContainer stops a container: SIGTERM (or the image's stop signal),
// then SIGKILL after timeoutSeconds. The call's own deadline is
// RequestTimeout plus timeoutSeconds, so a long grace period is not cut
// short. A container the runtime does not know is already stopped: NotFound
// is success.
func (c *Client) StopContainer(ctx context.Context, id string, timeoutSeconds int64) error {
	conn, err := c.connection("StopContainer")
	if err != nil {
		return err
	}
	timeout := c.cfg.RequestTimeout
	if timeoutSeconds > 0 {
		timeout += time.Duration(timeoutSeconds) * time.Second
	}
	_, err = call(ctx, c, conn, "StopContainer", mutation, timeout,
		&runtimeapi.StopContainerRequest{ContainerId: id, Timeout: timeoutSeconds}, conn.runtime.StopContainer)
	return c.idempotent("StopContainer", id, err)
}

// RemoveContainer removes a container (the runtime kills it first if it is
// running). A container the runtime does not know is already removed:
// NotFound is success.
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	conn, err := c.connection("RemoveContainer")
	if err != nil {
		return err
	}
	_, err = call(ctx, c, conn, "RemoveContainer", mutation, c.cfg.RequestTimeout,
		&runtimeapi.RemoveContainerRequest{ContainerId: id}, conn.runtime.RemoveContainer)
	return c.idempotent("RemoveContainer", id, err)
}

// ListContainers lists the containers matching filter (nil: all). A
// container unchanged since an earlier list is the value that list
// returned (see listCodec): read it, never change it.
func (c *Client) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	conn, err := c.connection("ListContainers")
	if err != nil {
		return nil, err
	}
	resp, err := call(ctx, c, conn, "ListContainers", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.ListContainersRequest{Filter: filter}, conn.runtime.ListContainers)
	if err != nil {
		return nil, err
	}
	return resp.Containers, nil
}

// ContainerStatus returns the status of one container (ErrNotFound if unknown).
func (c *Client) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	conn, err := c.connection("ContainerStatus")
	if err != nil {
		return nil, err
	}
	return call(ctx, c, conn, "ContainerStatus", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose}, conn.runtime.ContainerStatus)
}

// UpdateContainerResources changes the resources of a running container.
func (c *Client) UpdateContainerResources(ctx context.Context, id string, resources *runtimeapi.ContainerResources) error {
	conn, err := c.connection("UpdateContainerResources")
	if err != nil {
		return err
	}
	req := &runtimeapi.UpdateContainerResourcesRequest{ContainerId: id}
	if resources != nil {
		req.Linux, req.Windows = resources.Linux, resources.Windows
	}
	_, err = call(ctx, c, conn, "UpdateContainerResources", mutation, c.cfg.RequestTimeout,
		req, conn.runtime.UpdateContainerResources)
	return err
}

// UpdatePodSandboxResources gives the sandbox's pod-level resources (an
// in-place resize of pod-level resources, KEP-5419). kubelet calls it after
// it resized the pod cgroup itself; the embedded runtime resizes the pod
// cgroup it made.
func (c *Client) UpdatePodSandboxResources(ctx context.Context, sandboxID string, resources *runtimeapi.LinuxContainerResources) error {
	conn, err := c.connection("UpdatePodSandboxResources")
	if err != nil {
		return err
	}
	_, err = call(ctx, c, conn, "UpdatePodSandboxResources", mutation, c.cfg.RequestTimeout,
		&runtimeapi.UpdatePodSandboxResourcesRequest{PodSandboxId: sandboxID, Resources: resources}, conn.runtime.UpdatePodSandboxResources)
	return err
}

// ReopenContainerLog asks the runtime to reopen the container's log file
// (after log rotation renamed it).
func (c *Client) ReopenContainerLog(ctx context.Context, id string) error {
	conn, err := c.connection("ReopenContainerLog")
	if err != nil {
		return err
	}
	_, err = call(ctx, c, conn, "ReopenContainerLog", mutation, c.cfg.RequestTimeout,
		&runtimeapi.ReopenContainerLogRequest{ContainerId: id}, conn.runtime.ReopenContainerLog)
	return err
}

// ExecSync runs cmd in a container and returns its stdout, stderr and exit
// code. A non-zero exit code is not an error: read resp.ExitCode. The runtime
// kills the command after timeout (0: no limit) and the call then fails with
// ErrDeadlineExceeded. As in kubelet, the call's own deadline is
// RequestTimeout plus timeout, leaving the runtime time to clean up; with
// timeout 0 only ctx bounds the call. Never retried.
func (c *Client) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	conn, err := c.connection("ExecSync")
	if err != nil {
		return nil, err
	}
	callTimeout := time.Duration(0)
	if timeout > 0 {
		callTimeout = c.cfg.RequestTimeout + timeout
	}
	// The CRI carries whole seconds; round a sub-second timeout up rather
	// than to 0, which would mean no timeout.
	secs := int64((timeout + time.Second - 1) / time.Second)
	return call(ctx, c, conn, "ExecSync", mutation, callTimeout,
		&runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: secs}, conn.runtime.ExecSync)
}
