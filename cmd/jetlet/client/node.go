package client

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// nodeCordoned is added to the status of an unschedulable node, as
// kubectl does.
const nodeCordoned = ",SchedulingDisabled"

// nodeStatus is the STATUS column: Ready, NotReady, Unknown or Stopped,
// with ",SchedulingDisabled" when the node is cordoned.
func nodeStatus(n *jc.Node, now time.Time) string {
	s := n.State(now)
	if s != jc.NodeStopped && n.Record != nil && n.Record.Unschedulable {
		s += nodeCordoned
	}
	return s
}

// nodeHeartbeat is the HEARTBEAT column: how long ago, or what became of it.
func nodeHeartbeat(n *jc.Node, now time.Time) string {
	switch {
	case n.Record != nil:
		return ageSince(n.Record.HeartbeatAt, now) + " ago"
	case !n.StoppedAt.IsZero():
		return "deleted " + ageSince(n.StoppedAt, now) + " ago"
	}
	return "expired"
}

// nodeStates is c.NodesOf by name.
func nodeStates(ctx context.Context, c *jc.Client, node string, statuses []schemas.PodStatus) (map[string]*jc.Node, error) {
	nodes, err := c.NodesOf(ctx, node, statuses)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*jc.Node, len(nodes))
	for _, n := range nodes {
		out[n.Name] = n
	}
	return out, nil
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

// namedNode connects and returns what is known of the node called name:
// its state (nil when neither jetlet_nodes nor jetlet_status knows it) and
// its pods' statuses. The caller closes the client.
func namedNode(cmd *cobra.Command, f *clientFlags, name string) (*jc.Client, *jc.Node, []schemas.PodStatus, error) {
	if !schemas.ValidNodeName(name) {
		return nil, nil, nil, fmt.Errorf("%q is not a node name (a DNS-1123 label)", name)
	}
	c, err := connectClient(cmd, f)
	if err != nil {
		return nil, nil, nil, err
	}
	statuses, err := c.Statuses(cmd.Context(), name)
	if err != nil {
		c.Close()
		return nil, nil, nil, err
	}
	states, err := nodeStates(cmd.Context(), c, name, statuses)
	if err != nil {
		c.Close()
		return nil, nil, nil, err
	}
	return c, states[name], statuses, nil
}
