package embedded

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// attach connects the client's streams to the running container through its
// pod shim, which keeps the container's stdin (config.stdin) and terminal
// (config.tty) and fans its output out to attached clients as it copies it
// into the log: the client gets the output from the moment it attached, live,
// with nothing to tail, and its window sizes resize the terminal. It returns
// when the container exits, when the client's stdin ends (with stdin_once and
// no terminal the container's stdin is closed instead, and the attach lasts
// until the container exits), or when the client hangs up.
func (r *Runtime) attach(ctx context.Context, id string, in io.Reader, out, errOut io.Writer, resize <-chan remotecommand.TerminalSize) error {
	c, s, err := r.runningContainer(id)
	if err != nil {
		return err
	}
	ctx, hangUp := context.WithCancel(ctx)
	defer hangUp()

	var (
		names   []string
		child   []*os.File // the shim's ends
		own     []*os.File // this runtime's ends
		copying sync.WaitGroup
	)
	defer func() {
		for _, f := range append(child, own...) {
			f.Close()
		}
	}()
	if in != nil {
		pr, pw, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("attach: %w", err)
		}
		names, child, own = append(names, shim.StreamStdin), append(child, pr), append(own, pw)
		go func() {
			// The shim reads EOF when the client's stdin ends (or the attach
			// has ended and pw is closed).
			_, _ = io.Copy(pw, in)
			pw.Close()
		}()
	}
	for _, stream := range []struct {
		name string
		w    io.Writer
	}{{shim.StreamStdout, out}, {shim.StreamStderr, errOut}} {
		if stream.w == nil {
			continue
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("attach: %w", err)
		}
		names, child, own = append(names, stream.name), append(child, pw), append(own, pr)
		w := clientWriter{w: stream.w, hangUp: hangUp}
		copying.Go(func() {
			_, _ = io.Copy(w, pr)
			// A client gone: the shim's next write fails, and it detaches.
			pr.Close()
		})
	}
	sizes := make(chan shim.WindowSize)
	go func() {
		for {
			select {
			case size, ok := <-resize:
				if !ok {
					return
				}
				select {
				case sizes <- shim.WindowSize{Width: size.Width, Height: size.Height}:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	_, err = shim.Attach(ctx, s.dir, shim.Request{Op: shim.OpAttach, Dir: c.dir, Streams: names}, sizes, child...)
	for _, f := range child {
		f.Close()
	}
	// The shim has closed its ends of the output: the copies drain and end.
	copying.Wait()
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("attach to container %s: %w", c.id, err)
	}
	return nil
}
