package embedded

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// killWait bounds the wait for a process group to go after SIGKILL.
const killWait = time.Minute

// StopContainer sends the stop signal (SIGTERM unless the config names
// another) to the container's process group, and SIGKILL once timeout seconds
// have passed. It returns as soon as the process has exited. Stopping an
// unknown, created or exited container succeeds.
func (r *Runtime) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	c, err := r.getContainer(req.GetContainerId())
	if err != nil {
		if isNotFound(err) {
			return &runtimeapi.StopContainerResponse{}, nil
		}
		return nil, err
	}
	if err := r.stopContainer(ctx, c, req.GetTimeout()); err != nil {
		return nil, err
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (r *Runtime) stopContainer(ctx context.Context, c *container, timeout int64) error {
	// Wait for a Start in flight; the wait itself runs unlocked so that a
	// second Stop (say with timeout 0) is not held up by the first.
	c.opMu.Lock()
	r.mu.RLock()
	st, ex, exited := c.shim, c.exit, c.exited
	r.mu.RUnlock()
	c.opMu.Unlock()
	if st == nil || ex != nil {
		return nil
	}
	if timeout > 0 {
		sig := stopSignal(c.config.GetStopSignal(), c.images)
		r.log.Debug().Str("container", c.id).Stringer("signal", sig).Int64("timeout", timeout).Msg("stopping container")
		if err := signalGroup(st.PID, sig); err != nil {
			return errorf(crierr.ErrInternal, "signal container %s: %v", c.id, err)
		}
		if done, err := waitExited(ctx, exited, time.Duration(timeout)*time.Second); done || err != nil {
			return err
		}
	}
	if err := signalGroup(st.PID, syscall.SIGKILL); err != nil {
		return errorf(crierr.ErrInternal, "kill container %s: %v", c.id, err)
	}
	if done, err := waitExited(ctx, exited, killWait); done || err != nil {
		return err
	}
	return errorf(crierr.ErrDeadlineExceeded, "container %s did not exit %v after SIGKILL", c.id, killWait)
}

// waitExited waits up to d for exited to close and reports whether it did; the
// error is ctx's, as a status, when ctx ends first.
func waitExited(ctx context.Context, exited <-chan struct{}, d time.Duration) (bool, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-exited:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	case <-t.C:
		return false, nil
	}
}

// stopSignal is the signal that stops a container: its config's, else its
// image's StopSignal ("SIGQUIT", "QUIT" or "3"), else SIGTERM.
func stopSignal(s runtimeapi.Signal, ci *containerImages) syscall.Signal {
	if s != runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		if sig := unix.SignalNum(strings.TrimPrefix(s.String(), "SIGNAL_")); sig != 0 {
			return sig
		}
	}
	if ci != nil {
		if name := strings.ToUpper(ci.Root.Config.StopSignal); name != "" {
			if n, err := strconv.Atoi(name); err == nil && n > 0 {
				return syscall.Signal(n)
			}
			if !strings.HasPrefix(name, "SIG") {
				name = "SIG" + name
			}
			if sig := unix.SignalNum(name); sig != 0 {
				return sig
			}
		}
	}
	return syscall.SIGTERM
}
