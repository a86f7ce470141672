package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
)

// deleteOptions is what `jetlet delete` is told.
type deleteOptions struct {
	client         clientFlags
	publish        publishFlags
	uid            string
	grace          int64
	ignoreNotFound bool
}

func newDeleteCommand() *cobra.Command {
	var o deleteOptions
	cmd := &cobra.Command{
		Use:   "delete NAMESPACE/NAME | --uid UID | configmap NAMESPACE/NAME | secret NAMESPACE/NAME",
		Short: "Publish a delete intent for a pod; delete a ConfigMap or a Secret",
		Long: `Publish an intent with op "delete" for a pod, found by NAMESPACE/NAME (NAME
alone means namespace "default") or by --uid in jetlet_status and
JETLET_INTENTS. The node stops the pod's containers (grace period: --grace,
else the pod's terminationGracePeriodSeconds, else 30s) and removes its
sandbox.

Exit status: 0 when published (with --wait: when the result is Synced), 2
when a result is not Synced, 1 on any other error, a pod that does not exist
included (unless --ignore-not-found).`,
		Example: `  jetlet delete default/web --wait
  jetlet delete --uid 6f1c0e52-... --node n1 --grace 0`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVar(&o.uid, "uid", "", "the pod's uid, instead of NAMESPACE/NAME")
	fs.Int64Var(&o.grace, "grace", -1, "grace period in seconds before the containers are killed (-1: the pod's own)")
	o.publish.register(cmd, "wait for the SyncResult, showing the pod's events on stderr")
	fs.BoolVar(&o.ignoreNotFound, "ignore-not-found", false, "exit 0 when the pod does not exist or is already deleted")
	cli.AnnotateEnv(fs)
	cmd.AddCommand(newDeleteConfigMapCommand(), newDeleteSecretCommand())
	return cmd
}

func (o *deleteOptions) run(cmd *cobra.Command, args []string) error {
	if err := o.publish.validate(); err != nil {
		return err
	}
	ref, err := parsePodRef(args, o.uid)
	if err != nil {
		return err
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), o.publish.timeout)
	defer cancel()

	targets, err := o.targets(ctx, c, ref)
	if err != nil {
		if o.ignoreNotFound && isNotFound(err) {
			fmt.Fprintln(cmd.ErrOrStderr(), err.Error())
			return nil
		}
		return err
	}
	var plans []*plannedIntent
	for _, p := range targets {
		pi, err := o.plan(ctx, c, p)
		if err != nil {
			return err
		}
		plans = append(plans, pi)
	}
	return publishAndReport(ctx, cmd, c, plans, o.publish)
}

func isNotFound(err error) bool { return errors.As(err, new(*jc.NotFoundError)) }

// targets are the live pods ref names: on one node, or an error that says
// why there are none or which node to pick.
func (o *deleteOptions) targets(ctx context.Context, c *jc.Client, ref jc.PodRef) ([]*jc.Pod, error) {
	found, err := c.FindPods(ctx, o.client.node, ref)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, jc.PodNotFound(ref, o.client.node)
	}
	live := jc.LivePods(found)
	if len(live) == 0 {
		last := found[len(found)-1]
		how := "its last intent deletes it"
		if last.LastIntent != nil {
			how = fmt.Sprintf("intent %d deleted it", last.LastIntent.Seq)
		} else if last.Status != nil {
			how = "its status is " + string(last.Status.Phase)
		}
		return nil, &jc.NotFoundError{Msg: fmt.Sprintf("%s is already deleted on node %s (%s)", ref, last.Node, how)}
	}
	if err := jc.OnOneNode(ref, live); err != nil {
		return nil, err
	}
	return live, nil
}

// plan builds and validates the delete intent of one pod.
func (o *deleteOptions) plan(ctx context.Context, c *jc.Client, p *jc.Pod) (*plannedIntent, error) {
	revision, err := c.NextRevision(ctx, p)
	if err != nil {
		return nil, err
	}
	var grace *int64
	if o.grace >= 0 {
		grace = &o.grace
	}
	label := "pod/" + p.Namespace + "/" + p.Name
	in, err := jc.DeleteIntent(p, revision, grace)
	if invalid, ok := errors.AsType[*jc.InvalidError](err); ok {
		return nil, fmt.Errorf("cannot delete %s (uid %s): %s", label, p.UID, strings.Join(invalid.Reasons, "; "))
	}
	if err != nil {
		return nil, err
	}
	return &plannedIntent{Intent: in, label: label}, nil
}
