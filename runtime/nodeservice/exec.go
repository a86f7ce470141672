package nodeservice

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/schemas"
)

// replyOverhead is room left in a reply for its JSON beside the output.
const replyOverhead = 1 << 10

// exec runs a command in a container with ExecSync and replies with its
// output and exit code.
func (s *Service) exec(ctx context.Context, nc *nats.Conn, r micro.Request) {
	var req schemas.ExecRequest
	if err := json.Unmarshal(r.Data(), &req); err != nil {
		_ = respondError(r, replyErrorf(schemas.ServiceErrBadRequest, "exec request: %v", err))
		return
	}
	if err := req.Validate(); err != nil {
		_ = respondError(r, replyErrorf(schemas.ServiceErrBadRequest, "exec request: %v", err))
		return
	}
	reply := r.Reply()
	if !s.serve(func() { s.execute(ctx, nc, reply, req) }) {
		_ = respondError(r, errShuttingDown)
	}
}

func (s *Service) execute(ctx context.Context, nc *nats.Conn, reply string, req schemas.ExecRequest) {
	resp, err := s.run(ctx, req)
	if err == nil {
		var body []byte
		if body, err = json.Marshal(fit(resp, nc.MaxPayload()-replyOverhead)); err == nil {
			err = nc.Publish(reply, body)
		}
	} else {
		err = publishError(nc, reply, err)
	}
	if err != nil {
		s.log.Warn().Err(err).Str("pod", req.Namespace+"/"+req.Name).Msg("exec reply not sent")
	}
}

func (s *Service) run(ctx context.Context, req schemas.ExecRequest) (schemas.ExecResponse, error) {
	c, err := s.resolve(ctx, req.PodRef, false)
	if err != nil {
		return schemas.ExecResponse{}, err
	}
	if c.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return schemas.ExecResponse{}, replyErrorf(schemas.ServiceErrConflict, "container %s of pod %s is not running (%s)", c.name, c.pod, stateName(c.state))
	}
	timeout := time.Duration(req.TimeoutSeconds) * time.Second
	resp, err := s.rt.ExecSync(ctx, c.id, req.Command, timeout)
	switch {
	case errors.Is(err, crierr.ErrDeadlineExceeded):
		return schemas.ExecResponse{}, replyErrorf(schemas.ServiceErrTimeout, "command timed out after %s", timeout)
	case errors.Is(err, crierr.ErrNotFound):
		return schemas.ExecResponse{}, replyErrorf(schemas.ServiceErrConflict, "container %s of pod %s is gone", c.name, c.pod)
	case err != nil:
		return schemas.ExecResponse{}, err
	}
	return schemas.ExecResponse{Stdout: resp.Stdout, Stderr: resp.Stderr, ExitCode: resp.ExitCode}, nil
}

// fit cuts the output so that its JSON (base64, 4 bytes per 3) is at most
// max bytes, stderr keeping at least half the room if it needs it.
func fit(r schemas.ExecResponse, max int64) schemas.ExecResponse {
	room := int(max) / 4 * 3
	if len(r.Stdout)+len(r.Stderr) <= room {
		return r
	}
	r.Truncated = true
	r.Stderr = r.Stderr[:min(len(r.Stderr), room/2)]
	r.Stdout = r.Stdout[:min(len(r.Stdout), room-len(r.Stderr))]
	return r
}

// stateName is a CRI state as a person says it: CONTAINER_EXITED is "exited".
func stateName(s runtimeapi.ContainerState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "CONTAINER_"))
}
