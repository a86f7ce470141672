package client

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
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

// historyRow is one intent and its result.
type historyRow struct {
	Node       string          `json:"node"`
	UID        string          `json:"uid"`
	Namespace  string          `json:"namespace"`
	Name       string          `json:"name"`
	IntentSeq  uint64          `json:"intentSeq"`
	Revision   int64           `json:"revision"`
	Op         schemas.Op      `json:"op"`
	Published  *time.Time      `json:"publishedAt,omitempty"`
	Outcome    schemas.Outcome `json:"outcome,omitempty"`
	Error      string          `json:"error,omitempty"`
	ReceivedAt *time.Time      `json:"receivedAt,omitempty"`
	FinishedAt *time.Time      `json:"finishedAt,omitempty"`
	// Diff is, with -p, the unified diff of the pod's YAML from the
	// previous apply the node took to this one.
	Diff string `json:"diff,omitempty"`
}

func (o *historyOptions) run(cmd *cobra.Command, args []string) error {
	if err := checkOutput(o.output, outputJSON); err != nil {
		return err
	}
	c, pods, err := namedPods(cmd, &o.client, args, o.uid)
	if err != nil {
		return err
	}
	defer c.close()
	ctx := cmd.Context()
	w := cmd.OutOrStdout()
	for i, p := range pods {
		rows, err := c.history(ctx, p)
		if err != nil {
			return err
		}
		if o.patch {
			if err := c.historyDiffs(ctx, rows); err != nil {
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

// historyDiffs sets each apply row's Diff: what its pod changed since the
// previous apply the node took. Applies whose intent is no longer kept, or
// holds no pod jetlet can read, are passed over.
func (c *client) historyDiffs(ctx context.Context, rows []*historyRow) error {
	var prev *historyRow
	var prevYAML string
	for _, r := range rows {
		if r.Op != schemas.OpApply || r.Published == nil {
			continue
		}
		pod, err := c.intentPod(ctx, r.Node, r.IntentSeq)
		if err != nil {
			return err
		}
		if pod == nil {
			continue
		}
		doc, err := podDocument(pod)
		if err != nil {
			return err
		}
		if prev != nil {
			r.Diff = unifiedDiff(fmt.Sprintf("revision %d (intent %d)", prev.Revision, prev.IntentSeq),
				fmt.Sprintf("revision %d (intent %d)", r.Revision, r.IntentSeq), prevYAML, doc)
		}
		switch r.Outcome {
		case schemas.OutcomeStale, schemas.OutcomeRejected, schemas.OutcomeSuperseded:
			// not taken: the next diff is against the one before
		default:
			prev, prevYAML = r, doc
		}
	}
	return nil
}

// podDocument is what a diff compares of a pod: its metadata and spec as
// YAML, with the defaults the node applies (so that a default written out
// or left out is no change).
func podDocument(pod *corev1.Pod) (string, error) {
	pod = pod.DeepCopy()
	schemas.SetPodDefaults(pod)
	doc, err := yaml.Marshal(struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     corev1.PodSpec    `json:"spec"`
	}{pod.ObjectMeta, pod.Spec})
	return string(doc), err
}

// history joins the pod's intents and results on the intent sequence.
func (c *client) history(ctx context.Context, p *podRecord) ([]*historyRow, error) {
	bySeq := map[uint64]*historyRow{}
	row := func(seq uint64) *historyRow {
		if bySeq[seq] == nil {
			bySeq[seq] = &historyRow{Node: p.Node, UID: p.UID, Namespace: p.Namespace, Name: p.Name, IntentSeq: seq}
		}
		return bySeq[seq]
	}
	intents, err := c.intents(ctx, p.Node, p.UID, false)
	if err != nil {
		return nil, err
	}
	for _, in := range intents {
		r := row(in.Seq)
		r.Revision, r.Op = in.Revision, in.Op
		published := in.Published
		r.Published = &published
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{c.subj.Result(p.Node, p.UID)}, DeliverPolicy: jetstream.DeliverAllPolicy}
	err = c.readStream(ctx, schemas.StreamResults, cfg, false, func(msg jetstream.Msg) error {
		res, seq, ok := decodeResult(msg)
		if !ok {
			return nil
		}
		r := row(seq)
		if r.Published == nil { // the intent itself is no longer kept
			r.Revision, r.Op = res.Revision, res.Op
		}
		r.Outcome, r.Error = res.Outcome, res.Error
		r.ReceivedAt, r.FinishedAt = timePtr(res.ReceivedAt), timePtr(res.FinishedAt)
		return nil
	})
	if err != nil {
		return nil, err
	}
	rows := make([]*historyRow, 0, len(bySeq))
	for _, r := range bySeq {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b *historyRow) int { return cmp.Compare(a.IntentSeq, b.IntentSeq) })
	return rows, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func formatTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return formatTime(*t)
}
