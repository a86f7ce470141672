package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/consumer/status"
	"github.com/jetlet/jetlet/reconcile/admission"
	"github.com/jetlet/jetlet/runtime/nodeservice/nodeclient"
	"github.com/jetlet/jetlet/schemas"
)

// Node states, as Node.State says them. A node's state is derived from
// jetlet_nodes and jetlet_status; nothing stored is rewritten.
const (
	NodeReady = "Ready"
	// NodeNotReady: its heartbeat is fresh, but its Ready condition is not
	// True: the node itself says it cannot run pods.
	NodeNotReady = "NotReady"
	// NodeUnknown: its heartbeat is late, or expired from jetlet_nodes
	// while the node still has pods in jetlet_status (lost): what it last
	// said may no longer hold, as Kubernetes' Ready condition Unknown.
	NodeUnknown = "Unknown"
	// NodeStopped: its jetlet stopped cleanly and deleted its record.
	NodeStopped = "Stopped"
)

// Node is what the fleet says of one node: its record (capacity,
// allocatable, allocated, labels, taints, conditions, heartbeat) and how
// many pods it holds.
type Node struct {
	Name   string
	Record *schemas.NodeRecord // nil once deleted or expired
	// StoppedAt is when a clean stop deleted the record (the bucket keeps
	// the delete until its TTL); zero otherwise.
	StoppedAt time.Time
	// Pods counts the node's statuses in jetlet_status, deleted pods'
	// left out (filled by Nodes, not by WatchNodes).
	Pods int
}

// LivenessWindow is how old a heartbeat may be for its node to be live:
// three beats.
const LivenessWindow = 3 * status.HeartbeatPeriod

// Live reports whether the node's heartbeat is fresh at now.
func (n *Node) Live(now time.Time) bool {
	return n != nil && n.Record != nil && now.Sub(n.Record.HeartbeatAt) <= LivenessWindow
}

// Ready reports whether the node is live and its Ready condition True (a
// record without one, from a jetlet before node conditions, is ready by
// its heartbeat alone).
func (n *Node) Ready(now time.Time) bool { return n.Live(now) && reportsReady(n.Record) }

// Schedulable reports whether a scheduler may place a new pod on the node:
// Ready and not cordoned.
func (n *Node) Schedulable(now time.Time) bool { return n.Ready(now) && !n.Record.Unschedulable }

// State is NodeReady, NodeNotReady, NodeUnknown or NodeStopped.
func (n *Node) State(now time.Time) string {
	switch {
	case n.Ready(now):
		return NodeReady
	case n.Live(now):
		return NodeNotReady
	case n.Record == nil && !n.StoppedAt.IsZero():
		return NodeStopped
	}
	return NodeUnknown
}

// NotLive says why a node is not live, or "" when it is; n may be nil (a
// node never seen).
func (n *Node) NotLive(now time.Time) string {
	switch {
	case n == nil:
		return "never seen"
	case n.Live(now):
		return ""
	case n.Record != nil:
		return "last heartbeat " + now.Sub(n.Record.HeartbeatAt).Round(time.Second).String() + " ago"
	case !n.StoppedAt.IsZero():
		return "stopped: record deleted " + now.Sub(n.StoppedAt).Round(time.Second).String() + " ago"
	}
	return "record expired"
}

func reportsReady(rec *schemas.NodeRecord) bool {
	for _, c := range rec.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return true
}

// Nodes returns every node known to jetlet_nodes (records, and the deletes
// of clean stops) or to jetlet_status (a node with pods whose record
// expired: lost), sorted by name; name selects one ("" for all).
func (c *Client) Nodes(ctx context.Context, name string) ([]*Node, error) {
	statuses, err := c.Statuses(ctx, name)
	if err != nil {
		return nil, err
	}
	return c.NodesOf(ctx, name, statuses)
}

// NodesOf is Nodes with the pods' statuses already read (Statuses): their
// count per node is taken from them; nil counts none.
func (c *Client) NodesOf(ctx context.Context, name string, statuses []schemas.PodStatus) ([]*Node, error) {
	kv, err := c.bucket(ctx, schemas.BucketNodes)
	if err != nil {
		return nil, err
	}
	states := map[string]*Node{}
	get := func(name string) *Node {
		if states[name] == nil {
			states[name] = &Node{Name: name}
		}
		return states[name]
	}
	pattern := name
	if pattern == "" {
		pattern = ">"
	}
	err = watchInitial(ctx, kv, pattern, func(e jetstream.KeyValueEntry) {
		if rec, ok := nodeRecordOf(e); ok {
			get(e.Key()).Record = rec
		} else if e.Operation() != jetstream.KeyValuePut {
			get(e.Key()).StoppedAt = e.Created()
		}
	})
	if err != nil {
		return nil, c.jsError("bucket "+schemas.BucketNodes, err)
	}
	for _, st := range statuses {
		// A deleted pod's status stays for --terminated-status-ttl: it is
		// no longer the node's.
		if st.Node != "" && (name == "" || st.Node == name) && st.Phase != schemas.PhaseTerminated {
			get(st.Node).Pods++
		}
	}
	out := make([]*Node, 0, len(states))
	for _, n := range states {
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *Node) int { return compareStrings(a.Name, b.Name) })
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// GetNode returns the node called name; one neither jetlet_nodes nor
// jetlet_status knows is ErrNotFound.
func (c *Client) GetNode(ctx context.Context, name string) (*Node, error) {
	if !schemas.ValidNodeName(name) {
		return nil, errorOf(ErrInvalid, nil, "%q is not a node name (a DNS-1123 label)", name)
	}
	nodes, err := c.Nodes(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, &NotFoundError{Msg: fmt.Sprintf("node %s not found: no record in %s and no pod in %s", name, schemas.BucketNodes, schemas.BucketStatus)}
	}
	return nodes[0], nil
}

// nodeRecordOf decodes a put of jetlet_nodes; ok is false for a delete or
// a record that does not decode.
func nodeRecordOf(e jetstream.KeyValueEntry) (*schemas.NodeRecord, bool) {
	if e.Operation() != jetstream.KeyValuePut {
		return nil, false
	}
	var rec schemas.NodeRecord
	if json.Unmarshal(e.Value(), &rec) != nil || rec.Node != e.Key() {
		return nil, false
	}
	return &rec, true
}

// WatchNodes hands fn every node of jetlet_nodes as it is now, then each
// change (a heartbeat, a cordon, a clean stop) as it comes, until ctx ends
// (nil) or fn fails (its error). A node whose record was deleted comes
// with Record nil and StoppedAt set. Liveness is the caller's to judge from
// the heartbeat (Node.Live): an expired record is not announced.
func (c *Client) WatchNodes(ctx context.Context, fn func(*Node) error) error {
	kv, err := c.bucket(ctx, schemas.BucketNodes)
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return c.jsError("bucket "+schemas.BucketNodes, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("bucket %s: the watch ended", schemas.BucketNodes)
			}
			if e == nil {
				continue // every current record delivered
			}
			n := &Node{Name: e.Key()}
			if rec, ok := nodeRecordOf(e); ok {
				n.Record = rec
			} else if e.Operation() == jetstream.KeyValuePut {
				continue
			} else {
				n.StoppedAt = e.Created()
			}
			if err := fn(n); err != nil {
				return err
			}
		}
	}
}

// watchInitial hands fn every current entry of kv under pattern, deletes
// included, and returns once all are delivered.
func watchInitial(ctx context.Context, kv jetstream.KeyValue, pattern string, fn func(jetstream.KeyValueEntry)) error {
	w, err := kv.Watch(ctx, pattern)
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("the watch ended early")
			}
			if e == nil {
				return nil
			}
			fn(e)
		}
	}
}

// Cordon asks node, over its node service, to refuse new pods at admission
// (unschedulable true: Rejected, reason NodeUnschedulable) or to admit them
// again. The node must be live.
func (c *Client) Cordon(ctx context.Context, node string, unschedulable bool) (schemas.CordonResponse, error) {
	return askNode(ctx, c, node, schemas.EndpointCordon, "its cordon", func(ctx context.Context) (schemas.CordonResponse, error) {
		return nodeclient.Cordon(ctx, c.nc, c.subj, node, unschedulable)
	})
}

// askNode asks node's service at endpoint, for at most
// nodeclient.FirstReplyTimeout, and says what a failure means.
func askNode[T any](ctx context.Context, c *Client, node, endpoint, what string, ask func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, nodeclient.FirstReplyTimeout)
	defer cancel()
	ctx, stop := c.denied.Watch(ctx, c.subj.NodeService(node, endpoint))
	defer stop()
	resp, err := ask(ctx)
	if se, ok := errors.AsType[*nodeclient.ServiceError](err); ok {
		return resp, errorOf(se, nil, "node %s: %s", node, se.Description)
	}
	switch {
	case errors.Is(err, nodeclient.ErrNoNode):
		return resp, errorOf(ErrNotFound, err, "node %s does not answer at %s: %s needs its jetlet running", node, c.url, what)
	case err != nil:
		if denied, ok := c.deniedError(ctx, what+" on node "+node, ""); ok {
			return resp, denied
		}
		return resp, c.jsError(what+" on node "+node, err)
	}
	return resp, nil
}

// Admits says whether n would admit pod now, as its admission decides
// (kubelet's checks, reconcile/admission) from what its record says: the
// cordon, spec.nodeName, the node selector and required affinity, the
// taints, the pod's requests against what its admitted pods leave of the
// allocatable, the pressure conditions. What the record does not tell is
// not checked: host ports and the --pod-security level. A node that is not
// Ready admits nothing (reason NotReady). A scheduler filters the nodes
// with it; the node's own verdict at admission stays final (ErrRejected).
func (n *Node) Admits(pod *corev1.Pod, now time.Time) (ok bool, reason, message string) {
	if !n.Ready(now) {
		return false, NodeNotReady, fmt.Sprintf("node %s is %s", n.Name, n.State(now))
	}
	rec := n.Record
	free := corev1.ResourceList{}
	for name, q := range rec.Allocatable {
		left := q.DeepCopy()
		if used, ok := rec.Allocated[name]; ok {
			left.Sub(used)
		}
		if left.Sign() < 0 {
			left.Set(0)
		}
		free[name] = left
	}
	node := &admission.Node{Name: n.Name, Labels: rec.Labels, Taints: rec.Taints, Unschedulable: rec.Unschedulable,
		Allocatable: free, PodSecurity: admission.LevelPrivileged}
	for _, c := range rec.Conditions {
		pressure := c.Type == corev1.NodeMemoryPressure || c.Type == corev1.NodeDiskPressure || c.Type == corev1.NodePIDPressure
		if pressure && c.Status == corev1.ConditionTrue {
			node.Conditions = append(node.Conditions, c.Type)
		}
	}
	v := admission.Admit(node, pod, admission.NewHeld())
	return v.Admit, v.Reason, v.Message
}
