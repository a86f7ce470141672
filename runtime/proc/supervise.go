package proc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jetlet/jetlet/internal/atomicfile"
)

// launchShim starts the shim for c (spec.json already written), in the
// pod's network namespace netns when it has one, and waits for its report. On
// success the shim runs, owns the process and has written shim.json; on
// failure exit.json may hold a StartError.
func (r *Runtime) launchShim(ctx context.Context, c *container, netns string) (*shimState, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer pr.Close()
	shimLog, err := os.OpenFile(filepath.Join(c.dir, "shim.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		pw.Close()
		return nil, err
	}
	cmd := exec.Command(r.cfg.ShimPath)
	cmd.Env = []string{shimEnv + "=1", shimDirEnv + "=" + c.dir, "PATH=" + defaultPath}
	cmd.Dir = c.dir
	cmd.Stdout = shimLog // stdin stays /dev/null; nothing ties the shim to us
	cmd.Stderr = shimLog
	cmd.ExtraFiles = []*os.File{pw}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = startInPod(netns, cmd)
	pw.Close()
	shimLog.Close()
	if err != nil {
		return nil, fmt.Errorf("start shim %s: %w", r.cfg.ShimPath, err)
	}
	// Reap the shim when it ends; after a restart of the runtime nobody in this
	// process is its parent, and the lock file is how it is watched.
	go func() { _ = cmd.Wait() }()

	deadline := time.Now().Add(r.cfg.StartTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = pr.SetReadDeadline(deadline)
	var rep shimReport
	if err := json.NewDecoder(pr).Decode(&rep); err != nil {
		// Hung or crashed: make sure neither it nor a process it started lives
		// on unaccounted for.
		_ = cmd.Process.Kill()
		var st shimState
		if readJSON(filepath.Join(c.dir, "shim.json"), &st) == nil {
			_ = signalGroup(st.PID, syscall.SIGKILL)
		}
		return nil, fmt.Errorf("shim (pid %d) gave no report: %w; see %s", cmd.Process.Pid, err, filepath.Join(c.dir, "shim.log"))
	}
	if rep.Error != "" {
		return nil, errors.New(rep.Error)
	}
	if rep.Shim == nil {
		return nil, errors.New("shim reported nothing")
	}
	return rep.Shim, nil
}

// watch waits, in the background, for c's shim to end and then publishes the
// exit it recorded. c.exited must be set.
func (r *Runtime) watch(c *container) {
	go func() {
		waitLockReleased(filepath.Join(c.dir, "shim.lock"))
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
func (r *Runtime) collectExit(c *container) *exitState {
	var ex exitState
	err := readJSON(filepath.Join(c.dir, "exit.json"), &ex)
	if err == nil {
		return &ex
	}
	if errors.Is(err, os.ErrNotExist) && !dirExists(c.dir) {
		// Removed under us: nothing to record.
		return &exitState{ExitCode: shimLostCode, FinishedAt: time.Now().UnixNano(), Reason: reasonUnknown}
	}
	r.log.Warn().Err(err).Str("container", c.id).Msg("shim ended without a readable exit record")
	r.mu.RLock()
	st := c.shim
	r.mu.RUnlock()
	if st != nil {
		_ = syscall.Kill(-st.PID, syscall.SIGKILL) // leftovers, if the shim was killed
	}
	lost := &exitState{
		ExitCode: shimLostCode, FinishedAt: time.Now().UnixNano(), Reason: reasonUnknown,
		Message: "the container's shim ended without recording an exit status",
	}
	if err := writeJSONAtomic(filepath.Join(c.dir, "exit.json"), lost); err != nil && dirExists(c.dir) {
		r.log.Error().Err(err).Str("container", c.id).Msg("record lost exit")
	}
	return lost
}

// waitLockReleased blocks until nobody holds the flock on path (the shim has
// ended).
func waitLockReleased(path string) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err == nil {
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			return
		}
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

// shimAlive reports whether a shim holds the lock on path.
func shimAlive(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
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

// reopenLog asks c's shim to reopen its log file and waits for its answer.
func (r *Runtime) reopenLog(ctx context.Context, c *container, st *shimState) error {
	nonce := strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := atomicfile.Write(filepath.Join(c.dir, "reopen.req"), []byte(nonce), 0o600); err != nil {
		return err
	}
	if !shimAlive(filepath.Join(c.dir, "shim.lock")) {
		return errors.New("container's shim is not running")
	}
	if err := syscall.Kill(st.ShimPID, syscall.SIGUSR1); err != nil {
		return fmt.Errorf("signal shim: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var ack reopenAck
		if err := readJSON(filepath.Join(c.dir, "reopen.ack"), &ack); err == nil && ack.Nonce == nonce {
			if ack.Error != "" {
				return errors.New(ack.Error)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("shim did not reopen the log: %w", ctx.Err())
		case <-tick.C:
		}
	}
}
