package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/consumer/status"
	"github.com/jetlet/jetlet/schemas"
)

// Node states as `get nodes` shows them. A node is derived by the client from
// jetlet_nodes and jetlet_status; nothing stored is rewritten.
const (
	nodeReady = "Ready"
	// nodeNotReady: its heartbeat is fresh, but its Ready condition is not
	// True: the node itself says it cannot run pods.
	nodeNotReady = "NotReady"
	// nodeUnknown: its heartbeat is late, or expired from jetlet_nodes while
	// the node still has pods in jetlet_status (lost): what it last said
	// may no longer hold, as Kubernetes' Ready condition Unknown.
	nodeUnknown = "Unknown"
	// nodeStopped: its jetlet stopped cleanly and deleted its record.
	nodeStopped = "Stopped"
	// nodeCordoned is added to the status of an unschedulable node, as
	// kubectl does.
	nodeCordoned = ",SchedulingDisabled"
)

// nodeState is what the client knows of one node.
type nodeState struct {
	Name   string
	Record *schemas.NodeRecord // nil once deleted or expired
	// StoppedAt is when a clean stop deleted the record (the bucket keeps
	// the delete until its TTL); zero otherwise.
	StoppedAt time.Time
	// Pods counts the node's statuses in jetlet_status, deleted pods' left
	// out.
	Pods int
}

// live reports whether the node's heartbeat is fresh: within three beats.
func (n *nodeState) live(now time.Time) bool {
	return n.Record != nil && now.Sub(n.Record.HeartbeatAt) <= 3*status.HeartbeatPeriod
}

// status is the STATUS column: Ready, NotReady, Unknown or Stopped, with
// ",SchedulingDisabled" when the node is cordoned.
func (n *nodeState) status(now time.Time) string {
	var s string
	switch {
	case n.live(now) && reportsReady(n.Record):
		s = nodeReady
	case n.live(now):
		s = nodeNotReady
	case n.Record == nil && !n.StoppedAt.IsZero():
		return nodeStopped
	default:
		s = nodeUnknown
	}
	if n.Record != nil && n.Record.Unschedulable {
		s += nodeCordoned
	}
	return s
}

// reportsReady says whether the node's Ready condition is True; a record
// without one (a jetlet from before node conditions) is ready by its
// heartbeat alone.
func reportsReady(rec *schemas.NodeRecord) bool {
	for _, c := range rec.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return true
}

// heartbeat is the HEARTBEAT column: how long ago, or what became of it.
func (n *nodeState) heartbeat(now time.Time) string {
	switch {
	case n.Record != nil:
		return ageSince(n.Record.HeartbeatAt, now) + " ago"
	case !n.StoppedAt.IsZero():
		return "deleted " + ageSince(n.StoppedAt, now) + " ago"
	}
	return "expired"
}

// nodeStates returns every node known to jetlet_nodes (records, and the
// deletes of clean stops) or to statuses, the pods of jetlet_status (a node
// with pods whose record expired: lost), by name; node selects one ("" for
// all).
func (c *client) nodeStates(ctx context.Context, node string, statuses []schemas.PodStatus) (map[string]*nodeState, error) {
	kv, err := c.bucket(ctx, schemas.BucketNodes)
	if err != nil {
		return nil, err
	}
	states := map[string]*nodeState{}
	get := func(name string) *nodeState {
		if states[name] == nil {
			states[name] = &nodeState{Name: name}
		}
		return states[name]
	}
	err = watchInitial(ctx, kv, cmpOrAll(node), func(e jetstream.KeyValueEntry) {
		if e.Operation() != jetstream.KeyValuePut {
			get(e.Key()).StoppedAt = e.Created()
			return
		}
		var rec schemas.NodeRecord
		if json.Unmarshal(e.Value(), &rec) == nil && rec.Node == e.Key() {
			get(e.Key()).Record = &rec
		}
	})
	if err != nil {
		return nil, c.jsError("bucket "+schemas.BucketNodes, err)
	}
	for _, st := range statuses {
		// A deleted pod's status stays for --terminated-status-ttl: it is
		// no longer the node's.
		if st.Node != "" && (node == "" || st.Node == node) && st.Phase != schemas.PhaseTerminated {
			get(st.Node).Pods++
		}
	}
	return states, nil
}

func cmpOrAll(node string) string {
	if node == "" {
		return ">"
	}
	return node
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

// podPhaseShown is the phase `get pods` shows: a pod still running or
// starting on a node that is not Ready is Unknown, as kubectl shows the pods
// of a lost node; its stored status is left as it is.
func podPhaseShown(p *schemas.PodStatus, nodeReady bool) (schemas.PodPhase, bool) {
	if nodeReady {
		return p.Phase, false
	}
	switch p.Phase {
	case schemas.PhaseSucceeded, schemas.PhaseFailed, schemas.PhaseTerminated:
		return p.Phase, false
	}
	return phaseUnknown, true
}

// phaseUnknown is shown, never stored: the client's word for a pod whose node
// is not Ready (docs/contract.md section 6).
const phaseUnknown schemas.PodPhase = "Unknown"

func newNodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node cordon|uncordon|drain|replay|remove NAME",
		Short: "Cordon, uncordon, drain, replay or remove a node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("node what? `jetlet node cordon|uncordon|drain|replay|remove NAME`")
		},
	}
	cmd.AddCommand(newNodeCordonCommand(true), newNodeCordonCommand(false), newNodeDrainCommand(), newNodeReplayCommand(), newNodeRemoveCommand())
	return cmd
}

type nodeRemoveOptions struct{ client clientFlags }

func newNodeRemoveCommand() *cobra.Command {
	var o nodeRemoveOptions
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Delete a retired node's durable consumer, its jetlet_status keys and its jetlet_nodes record",
		Long: `Delete what a node that will not come back leaves on the server: its
durable consumer on JETLET_INTENTS (and the read-back consumers named after
it), its pods' statuses in jetlet_status and its record in jetlet_nodes.
Its intents, results and events stay. Refused while the node's heartbeat is
fresh: stop its jetlet first. Needs the operator's NATS credentials.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	o.client.register(cmd.Flags())
	cli.AnnotateEnv(cmd.Flags())
	return cmd
}

// namedNode connects and returns what is known of the node called name:
// its state (nil when neither jetlet_nodes nor jetlet_status knows it) and
// its pods' statuses. The caller closes the client.
func namedNode(cmd *cobra.Command, f *clientFlags, name string) (*client, *nodeState, []schemas.PodStatus, error) {
	if !schemas.ValidNodeName(name) {
		return nil, nil, nil, fmt.Errorf("%q is not a node name (a DNS-1123 label)", name)
	}
	c, err := connectClient(cmd, f)
	if err != nil {
		return nil, nil, nil, err
	}
	statuses, err := c.statuses(cmd.Context(), name)
	if err != nil {
		c.close()
		return nil, nil, nil, err
	}
	states, err := c.nodeStates(cmd.Context(), name, statuses)
	if err != nil {
		c.close()
		return nil, nil, nil, err
	}
	return c, states[name], statuses, nil
}

func (o *nodeRemoveOptions) run(cmd *cobra.Command, name string) error {
	c, st, statuses, err := namedNode(cmd, &o.client, name)
	if err != nil {
		return err
	}
	defer c.close()
	ctx := cmd.Context()
	now := time.Now()
	if st != nil && st.live(now) {
		return fmt.Errorf("node %s is live (heartbeat %s): stop its jetlet first", name, st.heartbeat(now))
	}
	partitions, err := c.intentPartitions(ctx)
	if err != nil {
		return err
	}
	var removed []string
	for _, cons := range nodeConsumers(o.client.subjectPrefix, name, partitions) {
		err := c.js.DeleteConsumer(ctx, cons.stream, cons.name)
		switch {
		case err == nil:
			removed = append(removed, "consumer "+cons.name)
		case !errors.Is(err, jetstream.ErrConsumerNotFound):
			return c.jsError("delete consumer "+cons.name+" of "+cons.stream, err)
		}
	}
	if len(statuses) > 0 { // deleted pods' too
		if err := c.purge(ctx, "KV_"+schemas.BucketStatus, "$KV."+schemas.BucketStatus+"."+name+".>"); err != nil {
			return err
		}
		removed = append(removed, fmt.Sprintf("%d status keys", len(statuses)))
	}
	if st != nil && (st.Record != nil || !st.StoppedAt.IsZero()) {
		if err := c.purge(ctx, "KV_"+schemas.BucketNodes, "$KV."+schemas.BucketNodes+"."+name); err != nil {
			return err
		}
		removed = append(removed, "node record")
	}
	if len(removed) == 0 {
		return fmt.Errorf("node %s not found: no consumer, status or record of it at %s", name, c.url)
	}
	slices.Sort(removed)
	fmt.Fprintf(cmd.OutOrStdout(), "node %s removed: %s\n", name, strings.Join(removed, ", "))
	return nil
}

// purge removes every message of stream on subject, deletes included.
func (c *client) purge(ctx context.Context, stream, subject string) error {
	s, err := c.stream(ctx, stream)
	if err != nil {
		return err
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return c.jsError("purge "+subject, err)
	}
	return nil
}

// statuses returns the pods of jetlet_status on node ("" for every node).
func (c *client) statuses(ctx context.Context, node string) ([]schemas.PodStatus, error) {
	return kvValues[schemas.PodStatus](ctx, c, schemas.BucketStatus, nodeToken(node)+".*")
}
