package client

import (
	"context"
	"io"

	"github.com/nats-io/nuid"

	"github.com/jetlet/jetlet/runtime/nodeservice/nodeclient"
	"github.com/jetlet/jetlet/schemas"
)

// StreamIO is what an exec or attach stream is joined to: stdin (nil:
// none), stdout and stderr, and a terminal's sizes.
type StreamIO = nodeclient.StreamIO

// Stream runs an exec (req.Command) or an attach in a running container
// of pod p through its node, with stdin and a terminal as req asks, joined
// to sio, and returns its exit code (an attach's: the container's, once
// it exited). Only operators may open streams (docs/security.md). ctx
// ending stops it.
func (c *Client) Stream(ctx context.Context, p *Pod, req schemas.StreamRequest, sio StreamIO) (int32, error) {
	if req.PodRef.UID == "" {
		req.PodRef = p.Ref(req.PodRef.Container)
	}
	s, err := nodeclient.OpenStream(ctx, c.nc, c.subj, p.Node, req)
	if err != nil {
		return 0, c.nodeServiceError(p, err)
	}
	exit, err := s.Run(ctx, sio)
	return exit.ExitCode, err
}

// PortForward carries one connection to port of pod p through its node:
// what local sends goes to the port, what the port sends comes back to
// local (half-closed at its end when local can), until both are done.
// local is closed at the end. The connections of one session (from
// NewPortForwardSession, one per port-forward command; "" for none)
// share the node's connection to the runtime, as kubectl's share one.
func (c *Client) PortForward(ctx context.Context, p *Pod, port int32, session string, local io.ReadWriteCloser) error {
	defer local.Close()
	s, err := nodeclient.OpenStream(ctx, c.nc, c.subj, p.Node, schemas.StreamRequest{PodRef: p.Ref(""), Kind: schemas.StreamPortForward, Port: port, Session: session})
	if err != nil {
		return c.nodeServiceError(p, err)
	}
	_, err = s.Run(ctx, StreamIO{Stdin: local, Stdout: local})
	return err
}

// NewPortForwardSession returns a new random session for PortForward.
func NewPortForwardSession() string { return nuid.Next() }
