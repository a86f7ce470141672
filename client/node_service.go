package client

import (
	"context"
	"errors"
	"io"

	"github.com/jetlet/jetlet/runtime/nodeservice/nodeclient"
	"github.com/jetlet/jetlet/schemas"
)

// Logs streams the log of a container of pod p, as its node reads it from
// the container's CRI log files, to out; with req.Follow until the
// container exits or ctx ends. req.PodRef is p's (p.Ref) when left empty.
func (c *Client) Logs(ctx context.Context, p *Pod, req schemas.LogsRequest, out io.Writer) error {
	if req.PodRef.UID == "" {
		req.PodRef = p.Ref(req.PodRef.Container)
	}
	_, err := nodeclient.Logs(ctx, c.nc, c.subj, p.Node, req, out)
	return c.nodeServiceError(p, err)
}

// Exec runs a command in a running container of pod p, through its node,
// and returns what it printed and its exit code. A command that outlived
// req.TimeoutSeconds is ErrExecTimedOut.
func (c *Client) Exec(ctx context.Context, p *Pod, req schemas.ExecRequest) (schemas.ExecResponse, error) {
	if req.PodRef.UID == "" {
		req.PodRef = p.Ref(req.PodRef.Container)
	}
	resp, err := nodeclient.Exec(ctx, c.nc, c.subj, p.Node, req)
	return resp, c.nodeServiceError(p, err)
}

// Plan asks in's node what it would do with the intent, publishing
// nothing: the Rejected error validation would give, admission's verdict
// on a new pod, and the plan of its next sync against the pod as it runs.
func (c *Client) Plan(ctx context.Context, in *Intent) (schemas.PodPlan, error) {
	return askNode(ctx, c, in.Node, schemas.EndpointPlan, "the plan of "+in.label(), func(ctx context.Context) (schemas.PodPlan, error) {
		return nodeclient.Plan(ctx, c.nc, c.subj, in.Node, in.UID, in.Body)
	})
}

// nodeServiceError says what a failed request to pod's node means.
func (c *Client) nodeServiceError(pod *Pod, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nodeclient.ErrNoNode):
		return errorOf(ErrNotFound, err, "node %s of pod %s/%s does not answer: is its jetlet running?", pod.Node, pod.Namespace, pod.Name)
	}
	if se, ok := errors.AsType[*nodeclient.ServiceError](err); ok {
		if se.Code == schemas.ServiceErrTimeout {
			return errorOf(ErrExecTimedOut, se, "node %s: %s", pod.Node, se.Description)
		}
		return errorOf(se, nil, "node %s: %s", pod.Node, se.Description)
	}
	return c.jsError("node "+pod.Node, err)
}
