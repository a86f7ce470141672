package client

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

type getNodesOptions struct {
	client clientFlags
	output string
}

func newGetNodesCommand() *cobra.Command {
	var o getNodesOptions
	cmd := &cobra.Command{
		Use:     "nodes",
		Aliases: []string{"node", "no"},
		Short:   "List the nodes of jetlet_nodes, and the nodes with pods in jetlet_status",
		Long: `List the nodes, as kubectl get nodes, with what a scheduler places pods by.

STATUS is Ready while the node's heartbeat in jetlet_nodes is fresh (within
three beats) and its Ready condition is True; NotReady when the heartbeat is
fresh but the node says it is not Ready; Unknown when the heartbeat is late,
or expired (--node-ttl of jetlet run) while the node still has pods in
jetlet_status: a lost node; Stopped when its jetlet stopped cleanly and
deleted its record. ",SchedulingDisabled" follows when the node is cordoned.
The pods of a node whose heartbeat is not fresh show as Unknown in get pods.

CPU, MEMORY and PODS are what the node's admitted pods request out of its
allocatable (250m/2, 512Mi/23Gi, 3/110); PRESSURE lists its pressure
conditions that are True. -o wide adds DECLARED-FEATURES, the features the
node declares (Kubernetes' node status.declaredFeatures, kubelet's names),
which a pod that needs one must find on its node. A node that will not come
back is removed with jetlet node remove. -o json and -o yaml print the
records as stored.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVarP(&o.output, "output", "o", "", "wide, json or yaml")
	completeOutput(cmd, outputWide, outputJSON, outputYAML)
	cli.AnnotateEnv(fs)
	return cmd
}

func (o *getNodesOptions) run(cmd *cobra.Command) error {
	if err := checkOutput(o.output, outputWide, outputJSON, outputYAML); err != nil {
		return err
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	w := cmd.OutOrStdout()
	if o.output != outputTable && o.output != outputWide {
		nodes, err := c.NodeRecords(cmd.Context(), o.client.node)
		if err != nil {
			return err
		}
		return printList(w, o.output, "NodeList", nodes)
	}
	statuses, err := c.Statuses(cmd.Context(), o.client.node)
	if err != nil {
		return err
	}
	states, err := nodeStates(cmd.Context(), c, o.client.node, statuses)
	if err != nil {
		return err
	}
	if len(states) == 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), "No nodes found: no jetlet has a record in "+schemas.BucketNodes+" or pods in "+schemas.BucketStatus+".")
		return nil
	}
	names := slices.Sorted(maps.Keys(states))
	tw := newTable(w)
	header := "NAME\tSTATUS\tCPU\tMEMORY\tPODS\tPRESSURE\tRUNTIME\tAGE\tVERSION\tHEARTBEAT"
	if o.output == outputWide {
		header += "\tDECLARED-FEATURES"
	}
	fmt.Fprintln(tw, header)
	now := time.Now()
	for _, name := range names {
		row := nodeRow(states[name], now)
		if o.output == outputWide {
			row = append(row, declaredFeatures(states[name].Record))
		}
		writeRow(tw, row...)
	}
	return tw.Flush()
}

// declaredFeatures is the DECLARED-FEATURES cell: <none> for a node that
// declares none, empty for one without a record.
func declaredFeatures(r *schemas.NodeRecord) string {
	switch {
	case r == nil:
		return ""
	case len(r.DeclaredFeatures) == 0:
		return "<none>"
	}
	return strings.Join(r.DeclaredFeatures, ",")
}

// nodeRow is a node's line of get nodes. A node without a record (lost, or
// stopped) shows only what jetlet_status says of it: its pods.
func nodeRow(n *jc.Node, now time.Time) []string {
	r := n.Record
	if r == nil {
		return []string{n.Name, nodeStatus(n, now), "", "", strconv.Itoa(n.Pods), "", "", "", "", nodeHeartbeat(n, now)}
	}
	pods := allocatedOfAllocatable(r, corev1.ResourcePods)
	if pods == "" { // a jetlet from before node status: its count
		pods = strconv.Itoa(r.Pods.Total)
	}
	return []string{
		n.Name, nodeStatus(n, now),
		allocatedOfAllocatable(r, corev1.ResourceCPU), allocatedOfAllocatable(r, corev1.ResourceMemory), pods,
		strings.Join(nodePressures(r), ","),
		strings.TrimSpace(r.RuntimeName + " " + r.RuntimeVersion), ageSince(r.StartedAt, now), r.JetletVersion,
		nodeHeartbeat(n, now),
	}
}
