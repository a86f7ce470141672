package client

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/jetlet/jetlet/schemas"
)

// Planner turns the PodIntents of one batch (an apply of several pods) into
// Intents for their nodes: it fills in each pod's namespace, uid and
// revision, validates the intent as the node will, and tells an apply that
// would change nothing. A pod named twice in a batch is chained: one uid,
// revisions one after the other. It reads each node's pods once: nothing
// the batch publishes changes them before it is planned. Not safe for
// concurrent use.
type Planner struct {
	c *Client
	// Force plans every apply, even one that equals its pod's newest
	// intent (Unchanged is then never set).
	Force   bool
	pods    map[string][]*Pod  // node → its pods, as read once
	planned map[string]*Intent // node/namespace/name → planned earlier
}

// NewPlanner returns a Planner with nothing planned.
func (c *Client) NewPlanner() *Planner {
	return &Planner{c: c, pods: map[string][]*Pod{}, planned: map[string]*Intent{}}
}

// known returns every known pod of node, read once per node.
func (p *Planner) known(ctx context.Context, node string) ([]*Pod, error) {
	pods, ok := p.pods[node]
	if !ok {
		var err error
		if pods, err = p.c.Pods(ctx, node); err != nil {
			return nil, err
		}
		p.pods[node] = pods
	}
	return pods, nil
}

// Existing returns the newest pod of namespace/name on node that is not
// deleted, or nil.
func (p *Planner) Existing(ctx context.Context, node, namespace, name string) (*Pod, error) {
	pods, err := p.known(ctx, node)
	if err != nil {
		return nil, err
	}
	for i := len(pods) - 1; i >= 0; i-- {
		if pods[i].Namespace == namespace && pods[i].Name == name && !pods[i].Deleted() {
			return pods[i], nil
		}
	}
	return nil, nil
}

// nextRevision is one above the highest revision of uid on node.
func (p *Planner) nextRevision(ctx context.Context, node, uid string) (int64, error) {
	pods, err := p.known(ctx, node)
	if err != nil {
		return 0, err
	}
	rec := &Pod{Node: node, UID: uid}
	if i := slices.IndexFunc(pods, func(r *Pod) bool { return r.UID == uid }); i >= 0 {
		rec = pods[i]
	}
	return p.c.NextRevision(ctx, rec)
}

// Plan plans the PodIntent envelope for node: a map as decoded from JSON
// or YAML (numbers as json.Number), kept generic so that every field
// reaches the node's validation as written. It sets the pod's namespace
// ("default" when absent), its uid (the live pod's of that name on node,
// else a new one) and, unless the envelope sets it, the revision (one above
// the highest the uid had). An invalid intent is an *InvalidError. An
// apply whose pod equals that of its uid's newest intent is Unchanged (not
// to be published; Revision and Seq are that intent's), unless Force.
func (p *Planner) Plan(ctx context.Context, node string, envelope map[string]any) (*Intent, error) {
	pod, _ := envelope["pod"].(map[string]any)
	if pod == nil {
		pod = map[string]any{}
		envelope["pod"] = pod
	}
	md, _ := pod["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		pod["metadata"] = md
	}
	if str(md, "namespace") == "" {
		md["namespace"] = "default"
	}
	op := schemas.Op(str(envelope, "op"))
	if op == "" {
		op = schemas.OpApply
	}
	key := node + "/" + str(md, "namespace") + "/" + str(md, "name")
	prev := p.planned[key] // the same pod earlier in this batch
	uid := str(md, "uid")
	generated := false // a uid made here has no past to look up
	switch {
	case uid != "":
		if !schemas.ValidUID(uid) {
			return nil, &InvalidError{Reasons: []string{fmt.Sprintf("pod.metadata.uid %q: not usable as a pod UID (1 to 128 of A-Z a-z 0-9 _ -)", uid)}}
		}
	case prev != nil:
		uid = prev.UID
	default:
		rec, err := p.Existing(ctx, node, str(md, "namespace"), str(md, "name"))
		if err != nil {
			return nil, err
		}
		if rec != nil {
			uid = rec.UID
		} else {
			uid, generated = uuid.NewString(), true
		}
	}
	md["uid"] = uid
	_, pinned := envelope["revision"] // a PodIntent that sets its revision
	var revision int64
	switch {
	case pinned:
	case prev != nil && prev.UID == uid:
		revision = prev.Revision + 1
	case generated:
		revision = 1
	default:
		var err error
		if revision, err = p.nextRevision(ctx, node, uid); err != nil {
			return nil, err
		}
	}
	if !pinned {
		envelope["revision"] = revision
	}
	body, err := json.Marshal(envelope)
	if err != nil {
		return nil, err
	}
	in, err := NewIntent(node, uid, body)
	if err != nil {
		return nil, err
	}
	in.Op = op
	if !p.Force && !pinned && !generated {
		if in.Unchanged, err = p.unchanged(ctx, in, prev); err != nil {
			return nil, err
		}
	}
	p.planned[key] = in
	return in, nil
}

// str reads a string field of m ("" when absent or not a string).
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// unchanged reports whether in, an apply, would carry the pod of the newest
// intent for its node and uid: the one planned earlier in this batch, else
// the newest kept in the intents stream. When it would, in takes that
// intent's revision and sequence.
func (p *Planner) unchanged(ctx context.Context, in, prev *Intent) (bool, error) {
	if in.Op != schemas.OpApply {
		return false, nil
	}
	want := PodOf(in.Body)
	if prev != nil && prev.UID == in.UID {
		// Unchanged only if the earlier one was: one to be published has
		// no sequence yet to point at.
		if !prev.Unchanged || !SamePod(want, PodOf(prev.Body)) {
			return false, nil
		}
		in.Revision, in.Seq = prev.Revision, prev.Seq
		return true, nil
	}
	pods, err := p.known(ctx, in.Node)
	if err != nil {
		return false, err
	}
	var last *IntentRecord
	for _, r := range pods {
		if r.UID == in.UID {
			last = r.LastIntent
		}
	}
	if last == nil || last.Op != schemas.OpApply {
		return false, nil
	}
	have, err := p.c.IntentPod(ctx, in.Node, last.Seq)
	if err != nil || !SamePod(want, have) {
		return false, err
	}
	in.Revision, in.Seq = last.Revision, last.Seq
	return true, nil
}

// SamePod reports whether two pods are the same desired state: metadata
// and spec equal once decoded and defaulted as the node defaults them, so
// that `restartPolicy: Always` written out or left to its default, "1000m"
// or "1" CPU, and an empty or absent list are alike. Status is ignored, as
// the node ignores it.
func SamePod(a, b *corev1.Pod) bool {
	if a == nil || b == nil {
		return false
	}
	a, b = a.DeepCopy(), b.DeepCopy()
	schemas.SetPodDefaults(a)
	schemas.SetPodDefaults(b)
	return equality.Semantic.DeepEqual(a.ObjectMeta, b.ObjectMeta) && equality.Semantic.DeepEqual(a.Spec, b.Spec)
}
