package client

import (
	"context"
	"errors"

	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/schemas"
)

type attachOptions struct {
	client    clientFlags
	uid       string
	container string
	streamFlags
}

func newAttachCommand() *cobra.Command {
	var o attachOptions
	cmd := &cobra.Command{
		Use:   "attach NAMESPACE/NAME | --uid UID [-c CONTAINER] [-i] [-t]",
		Short: "Attach to a running container's standard streams, through the pod's node",
		Long: `Attach to the standard output and error of a running container, and with -i
to its standard input, as kubectl attach: a stream over NATS through the
pod's node (docs/wire-protocol.md section 12), the operator's alone. -t is
for a container that has a terminal (tty: true): raw mode, its window size
followed.

It ends when the container exits, with the container's exit status, or
when jetlet attach is interrupted (the container goes on). Its own failures
exit 125.`,
		Example: `  jetlet attach default/web
  jetlet attach -it default/shell`,
		Args: cobra.MaximumNArgs(1),
	}
	finishStreamCommand(cmd, &o.client, &o.uid, &o.container, &o.streamFlags, o.run)
	return cmd
}

func (o *attachOptions) run(cmd *cobra.Command, args []string) (int, error) {
	c, pod, err := namedPod(cmd, &o.client, args, o.uid)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	code, err := o.runStream(cmd, c, pod, schemas.StreamRequest{PodRef: pod.Ref(o.container), Kind: schemas.StreamAttach})
	if errors.Is(err, context.Canceled) {
		return 0, nil // interrupted: a detach, the container goes on
	}
	return int(code), err
}
