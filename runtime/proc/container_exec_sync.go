package proc

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxExecOutput caps each of stdout and stderr, as kubelet and containerd do.
const maxExecOutput = 16 << 20

// ExecSync runs cmd with the container's environment, working dir and user,
// in a process group of its own, and returns its output and exit code. When
// the timeout (seconds; 0 means none) passes, the group is killed and the call
// fails with DeadlineExceeded.
func (r *Runtime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "exec command is empty")
	}
	c, err := r.getContainer(req.GetContainerId())
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	state := c.stateLocked()
	var netns string
	if s := r.sandboxes[c.sandboxID]; s != nil {
		netns = s.netns
	}
	r.mu.RUnlock()
	if state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.FailedPrecondition, "container %s is in %s state", c.id, state)
	}
	var spec shimSpec
	if err := readJSON(filepath.Join(c.dir, "spec.json"), &spec); err != nil {
		return nil, status.Errorf(codes.Internal, "read container spec: %v", err)
	}
	path, err := lookPath(req.GetCmd()[0], spec.Env)
	if err != nil {
		return nil, status.Errorf(codes.Unknown, "failed to exec in container: %v", err)
	}

	execCtx := ctx
	timeout := time.Duration(req.GetTimeout()) * time.Second
	if timeout > 0 {
		var cancel context.CancelFunc
		execCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var stdout, stderr capped
	stdout.max, stderr.max = maxExecOutput, maxExecOutput
	cmd := exec.CommandContext(execCtx, path, req.GetCmd()[1:]...)
	cmd.Args[0] = req.GetCmd()[0]
	cmd.Env = spec.Env
	cmd.Dir = spec.WorkDir
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.SysProcAttr = procAttr(spec.UID, spec.GID, spec.Groups)
	cmd.Cancel = func() error { return signalGroup(cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second // a child holding the pipes does not hold us
	if err = startInPod(netns, cmd); err == nil {
		err = cmd.Wait()
	}
	if timeout > 0 && errors.Is(execCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, status.Errorf(codes.DeadlineExceeded, "failed to exec in container: timeout %v exceeded", timeout)
	}
	if ctx.Err() != nil {
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	var code int32
	var ee *exec.ExitError
	switch {
	case err == nil, errors.Is(err, exec.ErrWaitDelay):
	case errors.As(err, &ee):
		code = exitCode(ee)
	default:
		return nil, status.Errorf(codes.Unknown, "failed to exec in container: %v", err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: code}, nil
}

// capped is a buffer that keeps the first max bytes and drops the rest.
type capped struct {
	bytes.Buffer
	max int
}

func (b *capped) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		if len(p) > room {
			b.Buffer.Write(p[:room])
		} else {
			b.Buffer.Write(p)
		}
	}
	return len(p), nil
}
