package client

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/jetlet/jetlet/schemas"
)

// HistoryRow is one intent of a pod beside the result that answered it.
type HistoryRow struct {
	Node       string          `json:"node"`
	UID        string          `json:"uid"`
	Namespace  string          `json:"namespace"`
	Name       string          `json:"name"`
	IntentSeq  uint64          `json:"intentSeq"`
	Revision   int64           `json:"revision"`
	Op         schemas.Op      `json:"op"`
	Published  *time.Time      `json:"publishedAt,omitempty"` // nil when the intent is no longer kept
	Outcome    schemas.Outcome `json:"outcome,omitempty"`     // empty before its result
	Error      string          `json:"error,omitempty"`
	ReceivedAt *time.Time      `json:"receivedAt,omitempty"`
	FinishedAt *time.Time      `json:"finishedAt,omitempty"`
	// Diff is, after HistoryDiffs, the unified diff of the pod's YAML from
	// the previous apply the node took to this one.
	Diff string `json:"diff,omitempty"`
}

// History joins pod p's intents still kept and its results on the intent
// sequence, oldest first.
func (c *Client) History(ctx context.Context, p *Pod) ([]*HistoryRow, error) {
	bySeq := map[uint64]*HistoryRow{}
	row := func(seq uint64) *HistoryRow {
		if bySeq[seq] == nil {
			bySeq[seq] = &HistoryRow{Node: p.Node, UID: p.UID, Namespace: p.Namespace, Name: p.Name, IntentSeq: seq}
		}
		return bySeq[seq]
	}
	intents, err := c.Intents(ctx, p.Node, p.UID, false)
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
	rows := make([]*HistoryRow, 0, len(bySeq))
	for _, r := range bySeq {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b *HistoryRow) int { return cmp.Compare(a.IntentSeq, b.IntentSeq) })
	return rows, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// HistoryDiffs sets each apply row's Diff: what its pod changed since the
// previous apply the node took (not Stale, Rejected or Superseded).
// Applies whose intent is no longer kept, or holds no pod jetlet can read,
// are passed over.
func (c *Client) HistoryDiffs(ctx context.Context, rows []*HistoryRow) error {
	var prev *HistoryRow
	var prevYAML string
	for _, r := range rows {
		if r.Op != schemas.OpApply || r.Published == nil {
			continue
		}
		pod, err := c.IntentPod(ctx, r.Node, r.IntentSeq)
		if err != nil {
			return err
		}
		if pod == nil {
			continue
		}
		doc, err := PodDocument(pod)
		if err != nil {
			return err
		}
		if prev != nil {
			r.Diff = UnifiedDiff(fmt.Sprintf("revision %d (intent %d)", prev.Revision, prev.IntentSeq),
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

// PodDocument is what a diff compares of a pod: its metadata and spec as
// YAML, with the defaults the node applies (so that a default written out
// or left out is no change).
func PodDocument(pod *corev1.Pod) (string, error) {
	pod = pod.DeepCopy()
	schemas.SetPodDefaults(pod)
	doc, err := yaml.Marshal(struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     corev1.PodSpec    `json:"spec"`
	}{pod.ObjectMeta, pod.Spec})
	return string(doc), err
}
