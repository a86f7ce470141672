package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// Exit codes of jetlet exec's own failures, above those a command usually
// returns, as docker run and timeout(1) do: every other code is the
// command's.
const (
	execTimedOut = 124 // the command outlived --timeout
	execFailed   = 125 // jetlet could not run the command
)

// execReplyMargin is how long jetlet exec waits beyond --timeout for the
// node's answer.
const execReplyMargin = 30 * time.Second

type execOptions struct {
	client    clientFlags
	uid       string
	container string
	timeout   time.Duration
	streamFlags
}

func newExecCommand() *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec NAMESPACE/NAME | --uid UID [-c CONTAINER] [-i] [-t] [--timeout D] -- COMMAND [ARG...]",
		Short: "Run a command in a running container, through the pod's node",
		Long: `Run a command in a running container of a pod, as kubectl exec. The pod's
node runs it and answers over NATS (docs/wire-protocol.md section 12).

Without -i and -t the command runs once (the CRI's ExecSync: no standard
input) and its standard output and error are printed when it ends. With -i
(standard input) or -t (a terminal: raw mode, its window size followed,
Ctrl-C and Ctrl-D sent to the command) it is a stream: input and output flow
as they are typed and printed. Streams are the operator's alone.

jetlet exec exits with the command's exit status. Its own failures exit 125
(bad flags, NATS, no such pod or container, the container not running) and
124 when the command outlived --timeout, as docker run and timeout(1) do.`,
		Example: `  jetlet exec default/web -- cat /etc/hostname
  jetlet exec default/web -c app --timeout 10s -- sh -c 'echo hi; exit 3'
  jetlet exec -it default/web -- sh`,
		Args: cobra.MinimumNArgs(1),
	}
	cmd.Flags().DurationVar(&o.timeout, "timeout", 0, "stop the command after this long (whole seconds; 0: no limit; not with -i or -t)")
	finishStreamCommand(cmd, &o.client, &o.uid, &o.container, &o.streamFlags, o.run)
	return cmd
}

// run returns the exit code and, for jetlet's own failures, why.
func (o *execOptions) run(cmd *cobra.Command, args []string) (int, error) {
	dash := cmd.ArgsLenAtDash()
	if dash < 0 || dash == len(args) {
		return execFailed, errors.New("give the command after --: jetlet exec NAMESPACE/NAME -- COMMAND [ARG...]")
	}
	if o.timeout < 0 {
		return execFailed, fmt.Errorf("--timeout %s: must not be negative", o.timeout)
	}
	if o.timeout > 0 && (o.stdin || o.tty) {
		return execFailed, errors.New("--timeout is for a command run once, not with -i or -t")
	}
	c, pod, err := namedPod(cmd, &o.client, args[:dash], o.uid)
	if err != nil {
		return execFailed, err
	}
	defer c.Close()
	if o.stdin || o.tty {
		code, err := o.runStream(cmd, c, pod, schemas.StreamRequest{PodRef: pod.Ref(o.container), Kind: schemas.StreamExec, Command: args[dash:]})
		if err != nil {
			return execFailed, err
		}
		return int(code), nil
	}
	ctx := cmd.Context()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout+execReplyMargin)
		defer cancel()
	}
	req := schemas.ExecRequest{PodRef: pod.Ref(o.container), Command: args[dash:], TimeoutSeconds: int64((o.timeout + time.Second - 1) / time.Second)}
	resp, err := c.Exec(ctx, pod, req)
	if errors.Is(err, jc.ErrExecTimedOut) {
		return execTimedOut, err
	}
	if err != nil {
		return execFailed, err
	}
	if err := write(cmd.OutOrStdout(), resp.Stdout, cmd.ErrOrStderr(), resp.Stderr); err != nil {
		return execFailed, err
	}
	if resp.Truncated {
		fmt.Fprintln(cmd.ErrOrStderr(), "jetlet: the output was cut to fit the NATS server's max payload")
	}
	return int(resp.ExitCode), nil
}

func write(stdout io.Writer, out []byte, stderr io.Writer, errOut []byte) error {
	if _, err := stdout.Write(out); err != nil {
		return err
	}
	_, err := stderr.Write(errOut)
	return err
}
