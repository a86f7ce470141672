package client

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
)

// IntentRecord is an intent as stored in JETLET_INTENTS, read loosely: a
// reader copes with whatever a scheduler published.
type IntentRecord struct {
	Node      string
	UID       string
	Seq       uint64 // its stream sequence
	Published time.Time
	Op        schemas.Op
	Revision  int64
	Namespace string
	Name      string
}

// looseIntent is the part of an intent body a reader needs.
type looseIntent struct {
	Op       schemas.Op `json:"op"`
	Revision int64      `json:"revision"`
	Pod      struct {
		Metadata struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	} `json:"pod"`
}

// parseIntentMsg reads an intent message; ok is false when its subject is not
// <prefix>.intent.<node>.<uid>.
func (c *Client) parseIntentMsg(msg jetstream.Msg) (IntentRecord, bool) {
	tokens := strings.Split(msg.Subject(), ".")
	if len(tokens) != 4 || tokens[0] != c.subj.Prefix || tokens[1] != "intent" {
		return IntentRecord{}, false
	}
	rec := IntentRecord{Node: tokens[2], UID: tokens[3]}
	if md, err := msg.Metadata(); err == nil {
		rec.Seq, rec.Published = md.Sequence.Stream, md.Timestamp
	}
	var li looseIntent
	_ = json.Unmarshal(msg.Data(), &li)
	rec.Op, rec.Revision = cmp.Or(li.Op, schemas.OpApply), li.Revision
	rec.Name, rec.Namespace = li.Pod.Metadata.Name, cmp.Or(li.Pod.Metadata.Namespace, "default")
	return rec, true
}

// nodeToken is the subject token that selects node, or every node.
func nodeToken(node string) string { return cmp.Or(node, "*") }

// Intents returns the intents of pod uid on node (either may be "" or "*"
// for all), in stream order (each stream's, when the intents are
// partitioned and node is all); with lastOnly, only the newest intent of
// each pod.
func (c *Client) Intents(ctx context.Context, node, uid string, lastOnly bool) ([]IntentRecord, error) {
	streams, err := c.intentsStreams(ctx, node)
	if err != nil {
		return nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{c.subj.Intent(nodeToken(node), cmp.Or(uid, "*"))}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if lastOnly {
		cfg.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
	}
	var out []IntentRecord
	for _, stream := range streams {
		err := c.readStream(ctx, stream, cfg, false, func(msg jetstream.Msg) error {
			if rec, ok := c.parseIntentMsg(msg); ok {
				out = append(out, rec)
			}
			return nil
		})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// readableIntents is Intents, or none when these credentials may not read
// JETLET_INTENTS (an auditor's: pod specs may hold secrets): the pods are
// then known by their statuses alone.
func (c *Client) readableIntents(ctx context.Context, node, uid string, lastOnly bool) ([]IntentRecord, error) {
	out, err := c.Intents(ctx, node, uid, lastOnly)
	if errors.Is(err, ErrDenied) {
		return nil, nil
	}
	return out, err
}

// Pod is what the fleet's streams say of one pod (a node and a uid): its
// status and its newest intent.
type Pod struct {
	Node       string
	UID        string
	Namespace  string
	Name       string
	Status     *schemas.PodStatus // nil before its node reported one
	LastIntent *IntentRecord      // nil when none is kept, or not readable
}

// Deleted reports whether the pod's newest intent deletes it, or, with no
// intent left, whether its status says it is going or gone.
func (p *Pod) Deleted() bool {
	if p.LastIntent != nil {
		return p.LastIntent.Op == schemas.OpDelete
	}
	return p.Status != nil && (p.Status.Phase == schemas.PhaseTerminated || p.Status.Phase == schemas.PhaseTerminating)
}

// Ref names the pod's container for the node service (logs, exec).
func (p *Pod) Ref(container string) schemas.PodRef {
	return schemas.PodRef{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Container: container}
}

// recency orders pods: the one with the newest intent or status last.
func (p *Pod) recency() uint64 {
	var seq uint64
	if p.LastIntent != nil {
		seq = p.LastIntent.Seq
	}
	if p.Status != nil {
		seq = max(seq, p.Status.IntentSeq)
	}
	return seq
}

// Pods returns every pod of node ("" for all nodes) found in jetlet_status
// or JETLET_INTENTS, oldest first, deleted ones included.
func (c *Client) Pods(ctx context.Context, node string) ([]*Pod, error) {
	statuses, err := c.Statuses(ctx, node)
	if err != nil {
		return nil, err
	}
	last, err := c.readableIntents(ctx, node, "*", true)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*Pod{}
	get := func(node, uid string) *Pod {
		key := schemas.StatusKey(node, uid)
		if byKey[key] == nil {
			byKey[key] = &Pod{Node: node, UID: uid}
		}
		return byKey[key]
	}
	for i := range statuses {
		st := &statuses[i]
		if st.Node == "" || st.UID == "" {
			continue
		}
		p := get(st.Node, st.UID)
		p.Status, p.Namespace, p.Name = st, st.Namespace, st.Name
	}
	for i := range last {
		in := &last[i]
		p := get(in.Node, in.UID)
		p.LastIntent = in
		if in.Name != "" {
			p.Namespace, p.Name = in.Namespace, in.Name
		}
	}
	out := make([]*Pod, 0, len(byKey))
	for _, p := range byKey {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Pod) int {
		return cmp.Or(cmp.Compare(a.recency(), b.recency()), cmp.Compare(a.Node, b.Node), cmp.Compare(a.UID, b.UID))
	})
	return out, nil
}

// PodRef names a pod: by namespace and name (unique on a node, not across
// nodes), or by uid.
type PodRef struct {
	Namespace, Name string
	UID             string
}

func (r PodRef) String() string {
	if r.UID != "" {
		return "pod with uid " + r.UID
	}
	return "pod " + r.Namespace + "/" + r.Name
}

func (r PodRef) matches(p *Pod) bool {
	if r.UID != "" {
		return p.UID == r.UID
	}
	return p.Namespace == r.Namespace && p.Name == r.Name
}

// FindPods returns the pods that ref names on node ("" for all nodes),
// oldest first, deleted ones included; none is no error.
func (c *Client) FindPods(ctx context.Context, node string, ref PodRef) ([]*Pod, error) {
	all, err := c.Pods(ctx, node)
	if err != nil {
		return nil, err
	}
	var out []*Pod
	for _, p := range all {
		if ref.matches(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// GetPod returns the newest pod that ref names on node ("" for any node)
// that is not deleted, else the newest deleted one. None is ErrNotFound; a
// name live on several nodes is an error that names them.
func (c *Client) GetPod(ctx context.Context, node string, ref PodRef) (*Pod, error) {
	pods, err := c.FindPods(ctx, node, ref)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, PodNotFound(ref, node)
	}
	if live := LivePods(pods); len(live) > 0 {
		pods = live
	}
	if err := OnOneNode(ref, pods); err != nil {
		return nil, err
	}
	return pods[len(pods)-1], nil
}

// LivePods is those of pods not deleted, in the same order.
func LivePods(pods []*Pod) []*Pod {
	var live []*Pod
	for _, p := range pods {
		if !p.Deleted() {
			live = append(live, p)
		}
	}
	return live
}

// OnOneNode is nil when pods, which ref names, are all on one node, and
// otherwise the error that asks which one is meant: a name is unique on a
// node, not across nodes.
func OnOneNode(ref PodRef, pods []*Pod) error {
	var nodes []string
	for _, p := range pods {
		if !slices.Contains(nodes, p.Node) {
			nodes = append(nodes, p.Node)
		}
	}
	if len(nodes) < 2 {
		return nil
	}
	slices.Sort(nodes)
	return fmt.Errorf("%s exists on nodes %s; pick one with --node", ref, strings.Join(nodes, ", "))
}

// NotFoundError is a pod, node or object that does not exist, or no longer
// does, as opposed to a stream or bucket missing. errors.Is(err,
// ErrNotFound) holds.
type NotFoundError struct{ Msg string }

func (e *NotFoundError) Error() string        { return e.Msg }
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// PodNotFound is the error for a pod that ref names but nobody knows.
func PodNotFound(ref PodRef, node string) error {
	where := "on any node"
	if node != "" {
		where = "on node " + node
	}
	return &NotFoundError{Msg: fmt.Sprintf("%s not found %s: no status in %s and no intent in %s", ref, where, schemas.BucketStatus, schemas.StreamIntents)}
}

// highestRevision is the highest revision of the pod in its status (as known
// already) and in every intent still kept for it.
func (c *Client) highestRevision(ctx context.Context, p *Pod) (int64, error) {
	var rev int64
	if p.Status != nil {
		rev = p.Status.Revision
	}
	all, err := c.Intents(ctx, p.Node, p.UID, false)
	if err != nil {
		return 0, err
	}
	for _, in := range all {
		rev = max(rev, in.Revision)
	}
	return rev, nil
}

// NextRevision is one above the highest revision that pod p has had, in
// its status or in any intent kept for it.
func (c *Client) NextRevision(ctx context.Context, p *Pod) (int64, error) {
	high, err := c.highestRevision(ctx, p)
	return high + 1, err
}

// Statuses returns the pods' statuses of jetlet_status on node ("" for
// every node).
func (c *Client) Statuses(ctx context.Context, node string) ([]schemas.PodStatus, error) {
	return kvValues[schemas.PodStatus](ctx, c, schemas.BucketStatus, nodeToken(node)+".*")
}

// NodeRecords returns the records of jetlet_nodes, of node name or of all
// ("" for all), sorted by node.
func (c *Client) NodeRecords(ctx context.Context, name string) ([]schemas.NodeRecord, error) {
	recs, err := kvValues[schemas.NodeRecord](ctx, c, schemas.BucketNodes, cmp.Or(name, ">"))
	slices.SortFunc(recs, func(a, b schemas.NodeRecord) int { return cmp.Compare(a.Node, b.Node) })
	return recs, err
}

// NodeNames returns the nodes with a heartbeat in jetlet_nodes, sorted.
func (c *Client) NodeNames(ctx context.Context) ([]string, error) {
	recs, err := c.NodeRecords(ctx, "")
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(recs))
	for _, r := range recs {
		names = append(names, r.Node)
	}
	slices.Sort(names)
	return names, nil
}

// DefaultNode is the only live node, or an error that says which exist.
func (c *Client) DefaultNode(ctx context.Context) (string, error) {
	names, err := c.NodeNames(ctx)
	if err != nil {
		return "", err
	}
	switch len(names) {
	case 1:
		return names[0], nil
	case 0:
		return "", fmt.Errorf("--node is required: no node has a heartbeat in %s (is `jetlet run` running against %s?)", schemas.BucketNodes, c.url)
	}
	return "", fmt.Errorf("--node is required: %d nodes are live (%s)", len(names), strings.Join(names, ", "))
}
