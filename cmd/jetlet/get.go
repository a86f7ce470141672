package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/schemas"
)

func newGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get pods|nodes",
		Short: "List pods (from jetlet_status) or nodes (from jetlet_nodes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("get what? `jetlet get pods` or `jetlet get nodes`")
		},
	}
	cmd.AddCommand(newGetPodsCommand(), newGetNodesCommand())
	return cmd
}

// list is what `get -o json|yaml` prints: the items with a kind, as kubectl
// prints a List.
type list[T any] struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Items      []T    `json:"items"`
}

func printList[T any](w io.Writer, output, kind string, items []T) error {
	if items == nil {
		items = []T{}
	}
	l := list[T]{APIVersion: schemas.APIVersion, Kind: kind, Items: items}
	if output == outputYAML {
		return printYAML(w, l)
	}
	return printJSON(w, l)
}

type getPodsOptions struct {
	client clientFlags
	output string
}

func newGetPodsCommand() *cobra.Command {
	var o getPodsOptions
	cmd := &cobra.Command{
		Use:     "pods",
		Aliases: []string{"pod", "po"},
		Short:   "List the pods of every node (or of --node) from jetlet_status",
		Long: `List pods as kubectl does, from the statuses the nodes keep in jetlet_status.

READY is ready/total app containers; STATUS is the phase, or what holds the
pod up (Init:0/1, ContainerCreating, CrashLoopBackOff, Error, Completed), or
Unknown for a pod not finished on a node that is not Ready (its heartbeat is
late, expired or deleted: see get nodes);
AGE counts from the earliest container start, else from the status. -o wide
adds UID, IP and REVISION; -o json and -o yaml print the statuses as stored.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVarP(&o.output, "output", "o", "", "wide, json or yaml")
	completeOutput(cmd, outputWide, outputJSON, outputYAML)
	annotateEnv(fs)
	return cmd
}

func (o *getPodsOptions) run(cmd *cobra.Command) error {
	if err := checkOutput(o.output, outputWide, outputJSON, outputYAML); err != nil {
		return err
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.close()
	pods, err := c.statuses(cmd.Context(), o.client.node)
	if err != nil {
		return err
	}
	nodes, err := c.nodeStates(cmd.Context(), o.client.node, pods)
	if err != nil {
		return err
	}
	slices.SortFunc(pods, func(a, b schemas.PodStatus) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Node, b.Node), cmp.Compare(a.UID, b.UID))
	})
	w := cmd.OutOrStdout()
	if o.output == outputJSON || o.output == outputYAML {
		return printList(w, o.output, "PodStatusList", pods)
	}
	if len(pods) == 0 {
		where := ""
		if o.client.node != "" {
			where = " on node " + o.client.node
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "No pods found%s.\n", where)
		return nil
	}
	tw := newTable(w)
	header := "NAMESPACE\tNAME\tREADY\tSTATUS\tRESTARTS\tAGE\tNODE"
	if o.output == outputWide {
		header += "\tUID\tIP\tREVISION"
	}
	fmt.Fprintln(tw, header)
	now := time.Now()
	for i := range pods {
		p := &pods[i]
		status := podStatusText(p)
		if phase, unknown := podPhaseShown(p, nodes[p.Node] != nil && nodes[p.Node].live(now)); unknown {
			status = string(phase)
		}
		row := []string{p.Namespace, p.Name, podReady(p), status, strconv.Itoa(int(podRestarts(p))), ageSince(podStart(p), now), p.Node}
		if o.output == outputWide {
			ip := ""
			if p.Sandbox != nil && len(p.Sandbox.IPs) > 0 {
				ip = p.Sandbox.IPs[0]
			}
			row = append(row, p.UID, ip, strconv.FormatInt(p.Revision, 10))
		}
		writeRow(tw, row...)
	}
	return tw.Flush()
}

// podReady is ready/total app containers.
func podReady(p *schemas.PodStatus) string {
	ready := 0
	for _, c := range p.Containers {
		if c.Ready {
			ready++
		}
	}
	return fmt.Sprintf("%d/%d", ready, len(p.Containers))
}

// podRestarts sums the app containers' restarts, or the init containers'
// while they run.
func podRestarts(p *schemas.PodStatus) int32 {
	var n int32
	for _, c := range p.Containers {
		n += c.RestartCount
	}
	if n == 0 {
		for _, c := range p.InitContainers {
			n += c.RestartCount
		}
	}
	return n
}

// podStart is the earliest container start, else when the status was taken.
func podStart(p *schemas.PodStatus) time.Time {
	var first time.Time
	for _, c := range slices.Concat(p.InitContainers, p.Containers) {
		t, err := time.Parse(time.RFC3339Nano, c.StartedAt)
		if err == nil && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return cmp.Or(first, p.ObservedAt)
}

// podStatusText is kubectl's STATUS column: the phase unless an init
// container or a container says better what the pod is doing.
func podStatusText(p *schemas.PodStatus) string {
	reason := string(p.Phase)
	if p.Phase == schemas.PhaseTerminating || p.Phase == schemas.PhaseTerminated {
		return reason
	}
	for i, c := range p.InitContainers {
		switch {
		case c.State == schemas.ContainerExited && c.ExitCode == 0:
			continue
		case c.State == schemas.ContainerExited && c.Reason != "":
			return "Init:" + c.Reason
		case c.State == schemas.ContainerExited:
			return "Init:ExitCode:" + strconv.Itoa(int(c.ExitCode))
		case c.State == schemas.ContainerWaiting && c.Reason != "" && c.Reason != "PodInitializing":
			return "Init:" + c.Reason
		}
		return fmt.Sprintf("Init:%d/%d", i, len(p.InitContainers))
	}
	running := false
	for i := len(p.Containers) - 1; i >= 0; i-- {
		c := p.Containers[i]
		switch {
		case c.State == schemas.ContainerWaiting && c.Reason != "":
			reason = c.Reason
		case c.State == schemas.ContainerExited && c.Reason != "":
			reason = c.Reason
		case c.State == schemas.ContainerExited:
			reason = "ExitCode:" + strconv.Itoa(int(c.ExitCode))
		case c.State == schemas.ContainerRunning && c.Ready:
			running = true
		}
	}
	if reason == "Completed" && running {
		reason = string(schemas.PhaseRunning)
	}
	return reason
}

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
		Long: `List the nodes. STATUS is Ready while the node's heartbeat in jetlet_nodes
is fresh (within three beats); NotReady when it is late, or expired (--node-ttl
of jetlet run) while the node still has pods in jetlet_status: a lost node;
Stopped when its jetlet stopped cleanly and deleted its record. The pods of a
node that is not Ready show as Unknown in get pods. A node that will not come
back is removed with jetlet node remove. -o json and -o yaml print the
records as stored.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVarP(&o.output, "output", "o", "", "json or yaml")
	completeOutput(cmd, outputJSON, outputYAML)
	annotateEnv(fs)
	return cmd
}

func (o *getNodesOptions) run(cmd *cobra.Command) error {
	if err := checkOutput(o.output, outputJSON, outputYAML); err != nil {
		return err
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.close()
	w := cmd.OutOrStdout()
	if o.output != outputTable {
		nodes, err := kvValues[schemas.NodeRecord](cmd.Context(), c, schemas.BucketNodes, nodeToken(o.client.node))
		if err != nil {
			return err
		}
		slices.SortFunc(nodes, func(a, b schemas.NodeRecord) int { return cmp.Compare(a.Node, b.Node) })
		return printList(w, o.output, "NodeList", nodes)
	}
	statuses, err := c.statuses(cmd.Context(), o.client.node)
	if err != nil {
		return err
	}
	states, err := c.nodeStates(cmd.Context(), o.client.node, statuses)
	if err != nil {
		return err
	}
	if len(states) == 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), "No nodes found: no jetlet has a record in "+schemas.BucketNodes+" or pods in "+schemas.BucketStatus+".")
		return nil
	}
	names := slices.Sorted(maps.Keys(states))
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tSTATUS\tPODS\tRUNTIME\tVERSION\tAGE\tHEARTBEAT")
	now := time.Now()
	for _, name := range names {
		n := states[name]
		pods, runtime, version, age := strconv.Itoa(n.Pods), "", "", ""
		if r := n.Record; r != nil {
			pods, runtime, version, age = strconv.Itoa(r.Pods.Total), strings.TrimSpace(r.RuntimeName+" "+r.RuntimeVersion), r.JetletVersion, ageSince(r.StartedAt, now)
		}
		writeRow(tw, name, n.status(now), pods, runtime, version, age, n.heartbeat(now))
	}
	return tw.Flush()
}
