package client

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
)

type nodeMoveOptions struct {
	client   clientFlags
	to       string
	grace    int64
	at       string
	timeout  time.Duration
	parallel int
	replay   bool // replay: re-create a lost node's pods; else drain a live one
}

func newNodeDrainCommand() *cobra.Command {
	var o nodeMoveOptions
	cmd := &cobra.Command{
		Use:   "drain NAME --to OTHER [--grace S]",
		Short: "Move a node's pods to another node: cordon it, re-create each pod there, then delete it here",
		Long: `Cordon NAME, then, --parallel pods at a time, publish each live pod's newest apply intent for
OTHER (a new uid, the old node and uid in the annotation ` + jc.MovedFromAnnotation + `),
wait for it to run there, and delete it from NAME with --grace (its
own grace period by default). Pods that ended (Succeeded, Failed) stay where
they are: their work is done. Interrupted and run again, it goes on where it stopped: a pod it
re-created already is found by its annotation, never created twice. Both
nodes must be live; OTHER must not be cordoned. Needs the operator's NATS
credentials.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	fs := cmd.Flags()
	fs.Int64Var(&o.grace, "grace", -1, "seconds each pod on NAME is given to stop (-1: its own terminationGracePeriodSeconds)")
	o.register(cmd)
	return cmd
}

func newNodeReplayCommand() *cobra.Command {
	o := nodeMoveOptions{replay: true}
	cmd := &cobra.Command{
		Use:   "replay NAME --to OTHER [--at TIME]",
		Short: "Re-create on another node the pods a lost node was to run",
		Long: `Read from the intents stream the desired state NAME had at --at (its last,
by default): each pod whose newest intent by then applies it, but those that
ended (Succeeded, Failed). Publish each
for OTHER (a new uid, the old node and uid in the annotation
` + jc.MovedFromAnnotation + `) and wait for it to run there. Refused while NAME is
live: drain a live node. Run again, it re-creates nothing twice. Needs the
scheduler's or the operator's NATS credentials.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	cmd.Flags().StringVar(&o.at, "at", "", "the moment whose desired state is replayed: RFC 3339, or a duration ago (10m); default: the last")
	o.register(cmd)
	return cmd
}

func (o *nodeMoveOptions) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.to, "to", "", "the node the pods move to (required)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long the whole move may take")
	fs.IntVar(&o.parallel, "parallel", 10, "pods moved at once")
	o.client.register(fs)
	cli.AnnotateEnv(fs)
}

func (o *nodeMoveOptions) run(cmd *cobra.Command, from string) error {
	switch {
	case o.timeout <= 0:
		return fmt.Errorf("--timeout %s: must be positive", o.timeout)
	case o.parallel < 1:
		return fmt.Errorf("--parallel %d: must be at least 1", o.parallel)
	}
	opts := jc.MoveOptions{Parallel: o.parallel}
	if o.at != "" {
		var err error
		if opts.At, err = parseAt(o.at, time.Now()); err != nil {
			return err
		}
	}
	if o.grace >= 0 {
		opts.Grace = &o.grace
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	out, progress := cmd.OutOrStdout(), cmd.ErrOrStderr()
	opts.OnCordoned = func() { fmt.Fprintf(out, "node/%s cordoned\n", from) }
	opts.OnLeft = func(p *jc.Pod) {
		fmt.Fprintf(out, "pod/%s/%s: left on %s (%s)\n", p.Namespace, p.Name, from, p.Status.Phase)
	}
	opts.OnDone = func(m *jc.Move, done, total int, err error) {
		label := "pod/" + m.From.Namespace + "/" + m.From.Name
		fmt.Fprintf(out, "[%d/%d] %s\n", done, total, label)
		if m.Running {
			there := ""
			if m.To.Unchanged {
				there = " (there already)"
			}
			fmt.Fprintf(out, "  on %s as uid %s%s\n", m.To.Node, m.To.UID, there)
		}
		if m.Deleted {
			fmt.Fprintf(out, "  deleted from %s\n", m.From.Node)
		}
		for i := range m.Events {
			fmt.Fprintf(progress, "  %s\n", eventLine(&m.Events[i]))
		}
		if err != nil {
			fmt.Fprintf(progress, "error: %s: %v\n", label, err)
		}
	}
	move := c.Drain
	if o.replay {
		move = c.Replay
	}
	moved, total, err := move(ctx, from, o.to, opts)
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%d of %d pods moved, then: %w; run it again to go on", moved, total, ctx.Err())
	case err != nil:
		return err
	}
	verb := "drained"
	if o.replay {
		verb = "replayed"
	}
	fmt.Fprintf(out, "node/%s %s to %s: %d of %d pods moved\n", from, verb, o.to, moved, total)
	if moved < total {
		return cli.ExitCodeError{Code: 2}
	}
	return nil
}
