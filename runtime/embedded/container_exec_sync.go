package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// maxExecOutput caps each of stdout and stderr, as kubelet and containerd do.
const maxExecOutput = 16 << 20

// ExecSync runs cmd in the container, through its pod's shim: in the
// container's namespaces and mount view, with its environment, working dir,
// user and capabilities, in a session of its own, and returns its output and
// exit code. When the timeout (seconds; 0 means none) passes, it is killed and
// the call fails with DeadlineExceeded.
func (r *Runtime) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, errorf(crierr.ErrInvalidArgument, "exec command is empty")
	}
	c, s, err := r.runningContainer(req.GetContainerId())
	if err != nil {
		return nil, err
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
	var stdio execIO
	defer stdio.close()
	if err := stdio.openPipes(nil, &stdout, &stderr, func() {}); err != nil {
		return nil, errorf(crierr.ErrInternal, "exec: %v", err)
	}
	resp, err := shim.Call(execCtx, s.dir, shim.Request{Op: shim.OpExec, Dir: c.dir, Args: req.GetCmd()}, stdio.child[:]...)
	stdio.closeChild()
	// The output ends with the command (killed if the call failed), unless
	// something it started holds the pipes: then, as the kubelet's exec, do
	// not wait for it.
	waitCopied(&stdio.copying, time.Second, stdio.outputs...)
	switch {
	case timeout > 0 && errors.Is(execCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		return nil, errorf(crierr.ErrDeadlineExceeded, "failed to exec in container: timeout %v exceeded", timeout)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, fmt.Errorf("failed to exec in container: %v", err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: resp.ExitCode}, nil
}

// waitCopied waits up to d for copying to finish, then cuts it short by
// closing the pipes it reads.
func waitCopied(copying *sync.WaitGroup, d time.Duration, pipes ...*os.File) {
	done := make(chan struct{})
	go func() { copying.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		for _, p := range pipes {
			p.Close()
		}
		<-done
	}
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
