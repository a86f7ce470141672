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
	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// intentRecord is an intent as stored in JETLET_INTENTS, read loosely: the
// client must cope with whatever a scheduler published.
type intentRecord struct {
	Node      string
	UID       string
	Seq       uint64
	Published time.Time
	Op        schemas.Op
	Revision  int64
	Namespace string
	Name      string
}

// looseIntent is the part of an intent body the client reads.
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
func (c *client) parseIntentMsg(msg jetstream.Msg) (intentRecord, bool) {
	tokens := strings.Split(msg.Subject(), ".")
	if len(tokens) != 4 || tokens[0] != c.subj.Prefix || tokens[1] != "intent" {
		return intentRecord{}, false
	}
	rec := intentRecord{Node: tokens[2], UID: tokens[3]}
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

// intents returns the intents of pod uid on node (either may be "*"), in
// stream order (each stream's, when the intents are partitioned and node is
// "*"); with lastOnly, only the newest intent of each pod.
func (c *client) intents(ctx context.Context, node, uid string, lastOnly bool) ([]intentRecord, error) {
	streams, err := c.intentsStreams(ctx, node)
	if err != nil {
		return nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{c.subj.Intent(node, uid)}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if lastOnly {
		cfg.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
	}
	var out []intentRecord
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

// readableIntents is intents, or none when these credentials may not read
// JETLET_INTENTS (an auditor's: pod specs may hold secrets): the pods are
// then known by their statuses alone.
func (c *client) readableIntents(ctx context.Context, node, uid string, lastOnly bool) ([]intentRecord, error) {
	out, err := c.intents(ctx, node, uid, lastOnly)
	if errors.As(err, new(*natsjs.PermissionError)) {
		return nil, nil
	}
	return out, err
}

// podRecord is what the client knows of one pod (node and uid): its status
// and its newest intent.
type podRecord struct {
	Node       string
	UID        string
	Namespace  string
	Name       string
	Status     *schemas.PodStatus
	LastIntent *intentRecord
}

// deleted reports whether the pod's newest intent deletes it, or, with no
// intent left, whether its status says it is going or gone.
func (p *podRecord) deleted() bool {
	if p.LastIntent != nil {
		return p.LastIntent.Op == schemas.OpDelete
	}
	return p.Status != nil && (p.Status.Phase == schemas.PhaseTerminated || p.Status.Phase == schemas.PhaseTerminating)
}

// recency orders pods: the one with the newest intent or status last.
func (p *podRecord) recency() uint64 {
	var seq uint64
	if p.LastIntent != nil {
		seq = p.LastIntent.Seq
	}
	if p.Status != nil {
		seq = max(seq, p.Status.IntentSeq)
	}
	return seq
}

// knownPods returns every pod of node (all nodes when empty) found in
// jetlet_status or JETLET_INTENTS, oldest first.
func (c *client) knownPods(ctx context.Context, node string) ([]*podRecord, error) {
	statuses, err := c.statuses(ctx, node)
	if err != nil {
		return nil, err
	}
	last, err := c.readableIntents(ctx, nodeToken(node), "*", true)
	if err != nil {
		return nil, err
	}
	byKey := map[string]*podRecord{}
	get := func(node, uid string) *podRecord {
		key := schemas.StatusKey(node, uid)
		if byKey[key] == nil {
			byKey[key] = &podRecord{Node: node, UID: uid}
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
	out := make([]*podRecord, 0, len(byKey))
	for _, p := range byKey {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *podRecord) int {
		return cmp.Or(cmp.Compare(a.recency(), b.recency()), cmp.Compare(a.Node, b.Node), cmp.Compare(a.UID, b.UID))
	})
	return out, nil
}

// podRef names a pod on the command line: NAMESPACE/NAME or a uid.
type podRef struct {
	Namespace, Name string
	UID             string
}

func (r podRef) String() string {
	if r.UID != "" {
		return "pod with uid " + r.UID
	}
	return "pod " + r.Namespace + "/" + r.Name
}

func (r podRef) matches(p *podRecord) bool {
	if r.UID != "" {
		return p.UID == r.UID
	}
	return p.Namespace == r.Namespace && p.Name == r.Name
}

// parsePodRef reads NAMESPACE/NAME (or NAME, in "default") or --uid; exactly
// one of them must be given.
func parsePodRef(args []string, uid string) (podRef, error) {
	switch {
	case len(args) == 0 && uid == "":
		return podRef{}, fmt.Errorf("name the pod: NAMESPACE/NAME or --uid UID")
	case len(args) > 0 && uid != "":
		return podRef{}, fmt.Errorf("give NAMESPACE/NAME or --uid, not both")
	case len(args) > 1:
		return podRef{}, fmt.Errorf("one pod at a time: got %d arguments", len(args))
	case uid != "":
		if !schemas.ValidUID(uid) {
			return podRef{}, fmt.Errorf("--uid %q: not a pod UID (1 to 128 of A-Z a-z 0-9 _ -)", uid)
		}
		return podRef{UID: uid}, nil
	}
	ns, name, found := strings.Cut(strings.TrimPrefix(args[0], "pod/"), "/")
	if !found {
		ns, name = "default", ns
	}
	if ns == "" || name == "" || strings.Contains(name, "/") {
		return podRef{}, fmt.Errorf("%q: want NAMESPACE/NAME", args[0])
	}
	return podRef{Namespace: ns, Name: name}, nil
}

// findPods returns the known pods that ref names on node (all nodes when
// empty), oldest first.
func (c *client) findPods(ctx context.Context, node string, ref podRef) ([]*podRecord, error) {
	all, err := c.knownPods(ctx, node)
	if err != nil {
		return nil, err
	}
	var out []*podRecord
	for _, p := range all {
		if ref.matches(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// namedPods connects and returns the known pods that args (NAMESPACE/NAME)
// or uid name, oldest first; none is an error. The caller closes the client.
func namedPods(cmd *cobra.Command, f *clientFlags, args []string, uid string) (*client, []*podRecord, error) {
	ref, err := parsePodRef(args, uid)
	if err != nil {
		return nil, nil, err
	}
	c, err := connectClient(cmd, f)
	if err != nil {
		return nil, nil, err
	}
	pods, err := c.findPods(cmd.Context(), f.node, ref)
	if err == nil && len(pods) == 0 {
		err = notFound(ref, f.node)
	}
	if err != nil {
		c.close()
		return nil, nil, err
	}
	return c, pods, nil
}

// livePods is those of pods not deleted, in the same order.
func livePods(pods []*podRecord) []*podRecord {
	var live []*podRecord
	for _, p := range pods {
		if !p.deleted() {
			live = append(live, p)
		}
	}
	return live
}

// onOneNode is nil when pods, which ref names, are all on one node, and
// otherwise the error that asks which one is meant: a name is unique on a
// node, not across nodes.
func onOneNode(ref podRef, pods []*podRecord) error {
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

// notFoundError is a pod that does not exist, or no longer does.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

// notFound is the error for a pod that ref names but nobody knows.
func notFound(ref podRef, node string) error {
	where := "on any node"
	if node != "" {
		where = "on node " + node
	}
	return &notFoundError{fmt.Sprintf("%s not found %s: no status in %s and no intent in %s", ref, where, schemas.BucketStatus, schemas.StreamIntents)}
}

// highestRevision is the highest revision of the pod in its status (as known
// already) and in every intent still kept for it.
func (c *client) highestRevision(ctx context.Context, p *podRecord) (int64, error) {
	var rev int64
	if p.Status != nil {
		rev = p.Status.Revision
	}
	all, err := c.intents(ctx, p.Node, p.UID, false)
	if err != nil {
		return 0, err
	}
	for _, in := range all {
		rev = max(rev, in.Revision)
	}
	return rev, nil
}

// nodeNames returns the nodes with a heartbeat in jetlet_nodes, sorted.
func (c *client) nodeNames(ctx context.Context) ([]string, error) {
	recs, err := kvValues[schemas.NodeRecord](ctx, c, schemas.BucketNodes, ">")
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

// defaultNode is the only live node, or an error that says which exist.
func (c *client) defaultNode(ctx context.Context) (string, error) {
	names, err := c.nodeNames(ctx)
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
