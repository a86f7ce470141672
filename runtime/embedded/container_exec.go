package embedded

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// execStreaming runs cmd in the running container, as ExecSync does, with the
// client's streams: pipes, or with tty a terminal whose master this runtime
// keeps (copying in and out and applying resize) and whose slave is the
// exec's stdin, stdout, stderr and controlling terminal. It returns when the
// command has exited and its output is copied; a non-zero exit is an
// exec.CodeExitError, which the library reports to the client as the exit
// code. A client that hangs up (its output fails) kills the command.
func (r *Runtime) execStreaming(ctx context.Context, id string, cmd []string, in io.Reader, out, errOut io.Writer, tty bool, resize <-chan remotecommand.TerminalSize) error {
	c, s, err := r.runningContainer(id)
	if err != nil {
		return err
	}
	ctx, hangUp := context.WithCancel(ctx)
	defer hangUp()
	var stdio execIO
	defer stdio.close()
	if tty {
		// From the container's own /dev/pts (its mount namespace's), so that
		// the command sees its terminal's name.
		r.mu.RLock()
		st := c.shim
		r.mu.RUnlock()
		if st == nil {
			return fmt.Errorf("exec: container %s is not running", c.id)
		}
		err = stdio.openTerminal(fmt.Sprintf("/proc/%d/root", st.PID), in, out, resize, hangUp)
	} else {
		err = stdio.openPipes(in, out, errOut, hangUp)
	}
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	resp, err := shim.Call(ctx, s.dir, shim.Request{Op: shim.OpExec, Dir: c.dir, Args: cmd, Tty: tty}, stdio.child[:]...)
	stdio.closeChild()
	// The output ends with the command, unless something it started holds
	// it: then, as ExecSync, do not wait for that.
	waitCopied(&stdio.copying, time.Second, stdio.outputs...)
	if err != nil {
		return fmt.Errorf("exec in container %s: %w", c.id, err)
	}
	if resp.ExitCode != 0 {
		return utilexec.CodeExitError{Err: fmt.Errorf("command '%s' exited with %d", strings.Join(cmd, " "), resp.ExitCode), Code: int(resp.ExitCode)}
	}
	return nil
}

// execIO is an exec's stdio (a streaming exec's, or ExecSync's): the child's
// ends, sent to the shim, and this runtime's, copied to and from the client.
type execIO struct {
	child   [3]*os.File // stdin, stdout, stderr of the exec
	outputs []*os.File  // this runtime's read ends of the output
	inputs  []*os.File  // this runtime's write ends of the input
	copying sync.WaitGroup
}

// openPipes makes a pipe for each stream the client gave, /dev/null for the others.
func (e *execIO) openPipes(in io.Reader, out, errOut io.Writer, hangUp context.CancelFunc) error {
	if in != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		e.child[0], e.inputs = r, append(e.inputs, w)
		go func() {
			// The command reads EOF when the client's input ends.
			_, _ = io.Copy(w, in)
			w.Close()
		}()
	}
	for i, w := range []io.Writer{out, errOut} {
		if w == nil {
			continue
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			return err
		}
		e.child[i+1], e.outputs = pw, append(e.outputs, pr)
		e.copyOutput(clientWriter{w: w, hangUp: hangUp}, pr)
	}
	return e.fillDevNull()
}

// openTerminal makes a terminal of the devpts instance at root/dev/pts
// (shim.OpenPty): its slave is the exec's stdio, its master carries the
// client's input and output and takes its window sizes.
func (e *execIO) openTerminal(root string, in io.Reader, out io.Writer, resize <-chan remotecommand.TerminalSize, hangUp context.CancelFunc) error {
	master, slave, err := shim.OpenPty(root)
	if err != nil {
		return err
	}
	e.child = [3]*os.File{slave, slave, slave}
	e.outputs = append(e.outputs, master)
	if in != nil {
		// The master stays open when the input ends: closing it would hang
		// up the terminal.
		go func() { _, _ = io.Copy(master, in) }()
	}
	if out == nil {
		out = io.Discard
	}
	e.copyOutput(clientWriter{w: out, hangUp: hangUp}, master)
	go func() {
		for size := range resize {
			_ = shim.SetWindowSize(master, size.Width, size.Height)
		}
	}()
	return nil
}

// fillDevNull gives the exec /dev/null for each stream the client left out.
func (e *execIO) fillDevNull() error {
	for i, f := range e.child {
		if f != nil {
			continue
		}
		null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		e.child[i] = null
	}
	return nil
}

func (e *execIO) copyOutput(dst io.Writer, src *os.File) {
	e.copying.Go(func() { _, _ = io.Copy(dst, src) })
}

// closeChild closes this runtime's copies of the exec's ends, once the shim
// has them: the output then ends when the command's does.
func (e *execIO) closeChild() {
	for i, f := range e.child {
		// A terminal's slave is all three.
		if f != nil && !slices.Contains(e.child[:i], f) {
			f.Close()
		}
	}
	e.child = [3]*os.File{}
}

func (e *execIO) close() {
	e.closeChild()
	for _, f := range append(e.outputs, e.inputs...) {
		f.Close()
	}
}
