package client

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

// streamFlags are exec's and attach's -i and -t, as kubectl's.
type streamFlags struct {
	stdin, tty bool
}

func (f *streamFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&f.stdin, "stdin", "i", false, "pass standard input to the container")
	cmd.Flags().BoolVarP(&f.tty, "tty", "t", false, "a terminal: standard input is put in raw mode, its size follows the window")
}

// finishStreamCommand gives exec and attach what they share: the flags
// (the client's, --uid, -c, -i, -t; cmd's own are registered before), and
// the exit status: run's, or execFailed for jetlet's own failure, a bad
// flag included, its error printed.
func finishStreamCommand(cmd *cobra.Command, client *clientFlags, uid, container *string, sf *streamFlags, run func(*cobra.Command, []string) (int, error)) {
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		code, err := run(cmd, args)
		if err != nil {
			fmt.Fprintln(cmd.ErrOrStderr(), "jetlet:", err)
			if code == 0 {
				code = execFailed
			}
		}
		if code != 0 {
			return cli.ExitCodeError{Code: code}
		}
		return nil
	}
	cmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		fmt.Fprintln(cmd.ErrOrStderr(), "jetlet:", err)
		return cli.ExitCodeError{Code: execFailed}
	})
	fs := cmd.Flags()
	client.register(fs)
	fs.StringVar(uid, "uid", "", "the pod's uid, instead of NAMESPACE/NAME")
	fs.StringVarP(container, "container", "c", "", "the container's name (default: the pod's only container)")
	sf.register(cmd)
	cli.AnnotateEnv(fs)
}

// runStream opens req's stream (exec or attach) and joins it to the
// command's standard streams, the terminal in raw mode with -t, until it
// ends; it returns the exit code.
func (f *streamFlags) runStream(cmd *cobra.Command, c *jc.Client, pod *jc.Pod, req schemas.StreamRequest) (int32, error) {
	sio := jc.StreamIO{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
	if f.stdin {
		sio.Stdin = cmd.InOrStdin()
	}
	req.Stdin, req.TTY = f.stdin, f.tty
	if f.tty {
		in, ok := cmd.InOrStdin().(*os.File)
		if !ok || !term.IsTerminal(int(in.Fd())) {
			// As kubectl: without a terminal to put in raw mode, no -t.
			fmt.Fprintln(cmd.ErrOrStderr(), "jetlet: unable to use a TTY: standard input is not a terminal")
			req.TTY = false
		} else {
			restore, sizes, err := rawTerminal(int(in.Fd()))
			if err != nil {
				return 0, err
			}
			defer restore()
			sio.Resize = sizes
		}
	}
	return c.Stream(cmd.Context(), pod, req, sio)
}

// rawTerminal puts the terminal fd in raw mode (Ctrl-C and Ctrl-D go to
// the container as bytes) and follows its size (SIGWINCH); restore puts
// it back and stops following.
func rawTerminal(fd int) (restore func(), sizes <-chan schemas.TerminalSize, err error) {
	state, err := term.MakeRaw(fd)
	if err != nil {
		return nil, nil, fmt.Errorf("raw terminal: %w", err)
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	out := make(chan schemas.TerminalSize, 1)
	done := make(chan struct{})
	send := func() {
		w, h, err := term.GetSize(fd)
		if err != nil {
			return
		}
		select {
		case <-out: // a size not yet sent is stale
		default:
		}
		out <- schemas.TerminalSize{Width: uint16(w), Height: uint16(h)}
	}
	send()
	go func() {
		for {
			select {
			case <-done:
				return
			case <-winch:
				send()
			}
		}
	}()
	return func() {
		signal.Stop(winch)
		close(done)
		_ = term.Restore(fd, state)
	}, out, nil
}
