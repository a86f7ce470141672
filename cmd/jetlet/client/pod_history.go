package client

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
)

type historyOptions struct {
	client clientFlags
	uid    string
	output string
	patch  bool
}

func newHistoryCommand() *cobra.Command {
	var o historyOptions
	cmd := &cobra.Command{
		Use:   "history NAMESPACE/NAME | --uid UID",
		Short: "Show a pod's intents and their results side by side",
		Long: `Show every intent of a pod still kept in JETLET_INTENTS (the newest 16 by
default) next to its SyncResult from JETLET_RESULTS: intent sequence,
revision, op, when it was published, outcome, error, and when the node
received and finished it. An intent with no result yet shows "<pending>".
NAMESPACE/NAME covers every uid that name had, oldest first.

-p shows, after the table, what each apply intent changed in the pod's
metadata and spec since the previous apply the node took (not Stale,
Rejected or Superseded), as a unified diff of the two pods' YAML with the
defaults the node applies; the first shows none, nor does one whose intent
is no longer kept.

-o json prints one line per intent (with -p, its diff in "diff").`,
		Example: `  jetlet history default/web
  jetlet history default/web -p
  jetlet history --uid 6f1c0e52-... -o json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVar(&o.uid, "uid", "", "the pod's uid, instead of NAMESPACE/NAME")
	fs.StringVarP(&o.output, "output", "o", "", "json: one line per intent")
	fs.BoolVarP(&o.patch, "patch", "p", false, "show what each revision changed in the pod's metadata and spec, as a diff")
	completeOutput(cmd, outputJSON)
	cli.AnnotateEnv(fs)
	return cmd
}

func (o *historyOptions) run(cmd *cobra.Command, args []string) error {
	if err := checkOutput(o.output, outputJSON); err != nil {
		return err
	}
	c, pods, err := namedPods(cmd, &o.client, args, o.uid)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	w := cmd.OutOrStdout()
	for i, p := range pods {
		rows, err := c.History(ctx, p)
		if err != nil {
			return err
		}
		if o.patch {
			if err := c.HistoryDiffs(ctx, rows); err != nil {
				return err
			}
		}
		if o.output == outputJSON {
			for _, r := range rows {
				if err := printJSONLine(w, r); err != nil {
					return err
				}
			}
			continue
		}
		if i > 0 {
			fmt.Fprintln(w)
		}
		phase := "no status"
		if p.Status != nil {
			phase = "phase " + string(p.Status.Phase)
		}
		fmt.Fprintf(w, "pod/%s/%s on node %s (uid %s, %s)\n", p.Namespace, p.Name, p.Node, p.UID, phase)
		tw := newTable(w)
		fmt.Fprintln(tw, "INTENT\tREVISION\tOP\tPUBLISHED\tOUTCOME\tRECEIVED\tFINISHED\tERROR")
		for _, r := range rows {
			outcome := string(r.Outcome)
			if outcome == "" {
				outcome = "<pending>"
			}
			writeRow(tw, strconv.FormatUint(r.IntentSeq, 10), strconv.FormatInt(r.Revision, 10), string(r.Op),
				formatTimePtr(r.Published), outcome, formatTimePtr(r.ReceivedAt), formatTimePtr(r.FinishedAt), oneLine(r.Error))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, r := range rows {
			if r.Diff != "" {
				fmt.Fprintf(w, "\nintent %d, revision %d:\n%s", r.IntentSeq, r.Revision, r.Diff)
			}
		}
	}
	return nil
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return formatTime(*t)
}
