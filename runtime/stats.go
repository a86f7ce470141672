package runtime

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListContainerStats returns the resource usage of the containers matching
// filter (nil: all the runtime measures; containerd and the embedded runtime
// measure running containers).
func (c *Client) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	conn, err := c.connection("ListContainerStats")
	if err != nil {
		return nil, err
	}
	resp, err := call(ctx, c, conn, "ListContainerStats", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.ListContainerStatsRequest{Filter: filter}, conn.runtime.ListContainerStats)
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// ListPodSandboxStats returns the resource usage of the sandboxes matching
// filter (nil: all the runtime measures, which is the ready ones).
func (c *Client) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	conn, err := c.connection("ListPodSandboxStats")
	if err != nil {
		return nil, err
	}
	resp, err := call(ctx, c, conn, "ListPodSandboxStats", readOnly, c.cfg.RequestTimeout,
		&runtimeapi.ListPodSandboxStatsRequest{Filter: filter}, conn.runtime.ListPodSandboxStats)
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}
