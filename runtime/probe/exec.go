package probe

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/probe/outcome"
)

// Exec runs cmd in the container: exit code 0 is OK, the output (stdout then
// stderr, at most 10 KiB) is the message. A command still running at timeout
// is killed by the runtime and is a failure, as kubelet's exec probe with
// ExecProbeTimeout.
func (r *Runner) Exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (outcome.Outcome, error) {
	resp, err := r.rt.ExecSync(ctx, containerID, cmd, timeout)
	switch {
	case err != nil && ctx.Err() != nil:
		return outcome.Outcome{}, fmt.Errorf("exec %q: %w", cmd, ctx.Err())
	case errors.Is(err, crierr.ErrDeadlineExceeded):
		return outcome.Outcome{Message: fmt.Sprintf("command %q timed out after %v", strings.Join(cmd, " "), timeout)}, nil
	case err != nil:
		return outcome.Outcome{}, fmt.Errorf("exec %q: %w", cmd, err)
	}
	out := truncate(append(append([]byte(nil), resp.GetStdout()...), resp.GetStderr()...))
	if code := resp.GetExitCode(); code != 0 {
		if out == "" {
			out = fmt.Sprintf("command %q exited with %d", strings.Join(cmd, " "), code)
		}
		return outcome.Outcome{Message: out}, nil
	}
	return outcome.Outcome{OK: true, Message: out}, nil
}
