package embedded

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// startInShim asks the shim of c's sandbox to start c (spec.json written) and
// returns once the command runs. On failure exit.json may hold a StartError.
func (r *Runtime) startInShim(ctx context.Context, c *container, s *sandbox) (*shim.State, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StartTimeout)
	defer cancel()
	resp, err := shim.Call(ctx, s.dir, shim.Request{Op: shim.OpStart, Dir: c.dir})
	if err != nil {
		return nil, err
	}
	if resp.State == nil {
		return nil, errors.New("pod shim reported nothing")
	}
	return resp.State, nil
}

// watch waits, in the background, for c's shim to end and then publishes the
// exit it recorded. c.exited must be set.
func (r *Runtime) watch(c *container) {
	released := r.locks.released(filepath.Join(c.dir, "shim.lock"))
	go func() {
		<-released
		ex := r.collectExit(c)
		r.mu.Lock()
		report := r.recordExitLocked(c, ex)
		ch := c.exited
		r.mu.Unlock()
		if report {
			r.markReported(c.id)
		}
		close(ch)
		r.log.Debug().Str("container", c.id).Int32("exit_code", ex.ExitCode).Msg("container exited")
	}()
}

// collectExit reads the exit recorded by c's (ended) shim. A shim that ended
// without recording one (killed, crashed) leaves an unknown exit, which is
// recorded here so that it stays stable.
func (r *Runtime) collectExit(c *container) *shim.Exit {
	var ex shim.Exit
	err := atomicfile.ReadJSON(filepath.Join(c.dir, "exit.json"), &ex)
	if err == nil {
		return r.withOOMReason(c, &ex)
	}
	if errors.Is(err, os.ErrNotExist) && !dirExists(c.dir) {
		// Removed under us: nothing to record.
		return &shim.Exit{ExitCode: shim.LostCode, FinishedAt: time.Now().UnixNano(), Reason: shim.ReasonUnknown}
	}
	r.log.Warn().Err(err).Str("container", c.id).Msg("shim ended without a readable exit record")
	r.mu.RLock()
	st := c.shim
	r.mu.RUnlock()
	if st != nil {
		_ = syscall.Kill(-st.PID, syscall.SIGKILL) // leftovers, if the shim was killed
	}
	lost := &shim.Exit{
		ExitCode: shim.LostCode, FinishedAt: time.Now().UnixNano(), Reason: shim.ReasonUnknown,
		Message: "the container's shim ended without recording an exit status",
	}
	if err := atomicfile.WriteJSON(filepath.Join(c.dir, "exit.json"), lost); err != nil && dirExists(c.dir) {
		r.log.Error().Err(err).Str("container", c.id).Msg("record lost exit")
	}
	return lost
}

// shimAlive reports whether a shim holds the lock on path. It opens it
// read-only, which lockWatch does not hear of.
func shimAlive(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return !lockFree(f)
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// signalGroup sends sig to the container's process group. A group that is
// already gone is not an error.
func signalGroup(pid int, sig syscall.Signal) error {
	if pid <= 0 {
		return nil
	}
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// reopenLog asks the shim of c's sandbox to reopen c's log file, and waits
// for its answer.
func (r *Runtime) reopenLog(ctx context.Context, c *container) error {
	s, err := r.getSandbox(c.sandboxID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = shim.Call(ctx, s.dir, shim.Request{Op: shim.OpReopen, Dir: c.dir})
	return err
}
