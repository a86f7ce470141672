package runtime

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Exec, Attach and PortForward ask the runtime for the URL of a CRI
// streaming session (its streaming server's, single use); the caller speaks
// the streaming protocol (SPDY or WebSocket) to it. None is retried: each
// URL is a token.

// Exec returns the URL of a streaming exec of req's command.
func (c *Client) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	conn, err := c.connection("Exec")
	if err != nil {
		return nil, err
	}
	return call(ctx, c, conn, "Exec", mutation, c.cfg.RequestTimeout, req, conn.runtime.Exec)
}

// Attach returns the URL of an attach to a running container.
func (c *Client) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	conn, err := c.connection("Attach")
	if err != nil {
		return nil, err
	}
	return call(ctx, c, conn, "Attach", mutation, c.cfg.RequestTimeout, req, conn.runtime.Attach)
}

// PortForward returns the URL of a port forward into a sandbox.
func (c *Client) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	conn, err := c.connection("PortForward")
	if err != nil {
		return nil, err
	}
	return call(ctx, c, conn, "PortForward", mutation, c.cfg.RequestTimeout, req, conn.runtime.PortForward)
}
