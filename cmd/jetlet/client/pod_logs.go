package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

type logsOptions struct {
	client     clientFlags
	uid        string
	container  string
	follow     bool
	tail       int64
	since      time.Duration
	previous   bool
	timestamps bool
}

func newLogsCommand() *cobra.Command {
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs NAMESPACE/NAME | --uid UID [-c CONTAINER] [-f] [--tail N] [--since D] [--previous] [--timestamps]",
		Short: "Print a container's log, read by the pod's node",
		Long: `Print the log of a container of a pod: the pod's node reads the container's
CRI log files (the rotated ones too; both streams, partial lines joined) and
streams them over NATS (docs/wire-protocol.md section 12). NAMESPACE/NAME is
the newest pod of that name.

-c names the container (needed when the pod has several). -f follows the log
until the container exits or jetlet logs is interrupted. --previous prints the
instance before the current one: what a crashed container printed.`,
		Example: `  jetlet logs default/web
  jetlet logs default/web -c app -f --tail 10
  jetlet logs default/crashloop --previous --timestamps`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVar(&o.uid, "uid", "", "the pod's uid, instead of NAMESPACE/NAME")
	fs.StringVarP(&o.container, "container", "c", "", "the container's name (default: the pod's only container)")
	fs.BoolVarP(&o.follow, "follow", "f", false, "follow the log until the container exits")
	fs.Int64Var(&o.tail, "tail", -1, "only the last N lines (-1: all)")
	fs.DurationVar(&o.since, "since", 0, "only lines newer than this, such as 10m")
	fs.BoolVarP(&o.previous, "previous", "p", false, "the container's previous instance")
	fs.BoolVar(&o.timestamps, "timestamps", false, "prefix each line with its RFC 3339 nano time")
	cli.AnnotateEnv(fs)
	return cmd
}

func (o *logsOptions) run(cmd *cobra.Command, args []string) error {
	if o.since < 0 {
		return fmt.Errorf("--since %s: must not be negative", o.since)
	}
	if o.follow && o.previous {
		return errors.New("--follow and --previous exclude each other: a previous instance writes no more")
	}
	c, pod, err := namedPod(cmd, &o.client, args, o.uid)
	if err != nil {
		return err
	}
	defer c.Close()
	req := schemas.LogsRequest{
		PodRef: pod.Ref(o.container), Follow: o.follow, Previous: o.previous, Timestamps: o.timestamps,
	}
	if o.tail >= 0 {
		req.TailLines = &o.tail
	}
	if o.since > 0 {
		since := time.Now().Add(-o.since)
		req.SinceTime = &since
	}
	err = c.Logs(cmd.Context(), pod, req, cmd.OutOrStdout())
	if errors.Is(err, context.Canceled) && o.follow {
		return nil // interrupted, as kubectl logs -f
	}
	return err
}

// namedPod connects and returns the newest of the pods that args
// (NAMESPACE/NAME) or uid name: of the live ones, or of all when none is.
// Those on several nodes are an error that asks for --node, as delete's
// is. The caller closes the client.
func namedPod(cmd *cobra.Command, f *clientFlags, args []string, uid string) (*jc.Client, *jc.Pod, error) {
	ref, err := parsePodRef(args, uid)
	if err != nil {
		return nil, nil, err
	}
	c, err := connectClient(cmd, f)
	if err != nil {
		return nil, nil, err
	}
	pod, err := c.GetPod(cmd.Context(), f.node, ref)
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, pod, nil
}
