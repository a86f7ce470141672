package client

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

type diffOptions struct {
	client  clientFlags
	files   []string
	timeout time.Duration
}

func newDiffCommand() *cobra.Command {
	var o diffOptions
	cmd := &cobra.Command{
		Use:   "diff -f FILE|-",
		Short: "Show what applying a manifest would change: its pods' specs, and what their nodes would do",
		Long: `For each pod of the manifest, as apply would publish it: the unified diff of
its metadata and spec against the pod's newest intent on its node (with the
defaults the node applies), then the node's plan, as apply --dry-run=node
shows it. Nothing is published or stored.

Exit status, as kubectl diff's: 0 when nothing would change, 1 when a spec
differs or a node would act, 2 and more on an error.`,
		Example: `  jetlet diff -f web.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			changes, err := o.run(cmd)
			switch {
			case err != nil:
				// 1 says that something would change.
				fmt.Fprintln(cmd.ErrOrStderr(), "jetlet:", err)
				return cli.ExitCodeError{Code: 2}
			case changes:
				return cli.ExitCodeError{Code: 1}
			}
			return nil
		},
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringArrayVarP(&o.files, "filename", "f", nil, "manifest file, or - for standard input (repeatable)")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "how long the whole diff may take")
	_ = cmd.MarkFlagRequired("filename")
	cli.AnnotateEnv(fs)
	return cmd
}

// run shows the diffs and plans, and reports whether anything would change.
func (o *diffOptions) run(cmd *cobra.Command) (changes bool, err error) {
	var docs []*document
	for _, f := range o.files {
		data, source, err := readInput(cmd.InOrStdin(), f)
		if err != nil {
			return false, err
		}
		more, err := parseManifest(data, source)
		if err != nil {
			return false, err
		}
		docs = append(docs, more...)
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return false, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	w := cmd.OutOrStdout()
	p := newPlanner(c, o.client.node)
	for _, d := range docs {
		if d.config != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: a %s: not diffed\n", d.where, str(d.config, "kind"))
			continue
		}
		pi, err := p.plan(ctx, d)
		if err != nil {
			return false, err
		}
		differs, err := o.specDiff(ctx, c, p, pi, w)
		if err != nil {
			return false, err
		}
		plan, err := c.Plan(ctx, pi.Intent)
		if err != nil {
			return false, err
		}
		printPlan(w, pi, plan)
		changes = changes || differs || acts(plan)
	}
	return changes, nil
}

// specDiff prints the diff of pi's pod against the pod's newest apply
// intent on its node, and reports whether they differ (a pod the node has
// no intent for differs).
func (o *diffOptions) specDiff(ctx context.Context, c *jc.Client, p *planner, pi *plannedIntent, w io.Writer) (bool, error) {
	want := jc.PodOf(pi.Body)
	if want == nil {
		return true, nil // validation would have refused it
	}
	is, err := jc.PodDocument(want)
	if err != nil {
		return false, err
	}
	was, from := "", "(no intent on node "+pi.Node+")"
	rec, err := p.Existing(ctx, pi.Node, want.Namespace, want.Name)
	if err != nil {
		return false, err
	}
	if rec != nil && rec.LastIntent != nil && rec.LastIntent.Op == schemas.OpApply {
		have, err := c.IntentPod(ctx, pi.Node, rec.LastIntent.Seq)
		if err != nil {
			return false, err
		}
		if have != nil {
			if was, err = jc.PodDocument(have); err != nil {
				return false, err
			}
			from = fmt.Sprintf("%s on node %s (revision %d, intent %d)", pi.label, pi.Node, rec.LastIntent.Revision, rec.LastIntent.Seq)
		}
	}
	diff := jc.UnifiedDiff(from, pi.label+" as applied now", was, is)
	fmt.Fprint(w, diff)
	return diff != "", nil
}

// acts reports whether a plan changes anything on the node.
func acts(plan schemas.PodPlan) bool {
	if plan.Rejected != "" || (plan.Admission != nil && !plan.Admission.Admit) || plan.Finished {
		return false
	}
	for _, s := range append([]schemas.PlanStep{plan.Sandbox}, plan.Containers...) {
		switch s.Action {
		case schemas.PlanKeep, schemas.PlanWait, schemas.PlanNone:
		default:
			return true
		}
	}
	return false
}
