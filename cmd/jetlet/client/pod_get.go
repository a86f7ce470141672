package client

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

func newGetCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get pods|nodes|configmaps|secrets",
		Short: "List pods (from jetlet_status), nodes (from jetlet_nodes), ConfigMaps or sealed Secrets",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("get what? `jetlet get pods`, `jetlet get nodes`, `jetlet get configmaps` or `jetlet get secrets`")
		},
	}
	cmd.AddCommand(newGetPodsCommand(), newGetNodesCommand(), newGetConfigMapsCommand(), newGetSecretsCommand())
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
	client        clientFlags
	output        string
	namespace     string
	allNamespaces bool
	showAll       bool
	watch         bool
	at            string
}

func newGetPodsCommand() *cobra.Command {
	var o getPodsOptions
	cmd := &cobra.Command{
		Use:     "pods [NAME]",
		Aliases: []string{"pod", "po"},
		Short:   "List the pods of a namespace (or of every one) from jetlet_status",
		Long: `List pods as kubectl does, from the statuses the nodes keep in jetlet_status:
those of namespace -n (default "default"), or of every namespace with -A, on
every node or on --node; NAME lists the pods of that name only.

READY is ready/total app containers; STATUS is the phase, or what holds the
pod up (Init:0/1, ContainerCreating, CrashLoopBackOff, Error, Completed), or
a Failed pod's reason (OutOfmemory and the other admission refusals, Evicted,
DeadlineExceeded), or Unknown for a pod not finished on a node that is not Ready (its heartbeat is
late, expired or deleted: see get nodes);
AGE counts from the pod's first intent still in JETLET_INTENTS, else from its
earliest container start. A deleted pod (Terminated) is listed only with -a.
-w prints the list, then a line for each change, until interrupted. -o wide
adds UID, IP and REVISION; -o json and -o yaml print the statuses as stored
(with -w, one JSON status per line).

--at TIME (RFC 3339, or a duration ago like 10m) lists the pods as they were
then, from JETLET_RESULTS: each pod's status as its newest result finished by
TIME carried it; a pod deleted or Terminated by then is listed only with -a.
AGE is counted to TIME, and no pod shows Unknown (a node's liveness then is
not kept).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVarP(&o.output, "output", "o", "", "wide, json or yaml")
	fs.StringVarP(&o.namespace, "namespace", "n", "default", "the namespace to list")
	fs.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list the pods of every namespace")
	fs.BoolVarP(&o.showAll, "all", "a", false, "list deleted (Terminated) pods too")
	fs.BoolVarP(&o.watch, "watch", "w", false, "after the list, print a line for each change until interrupted")
	fs.StringVar(&o.at, "at", "", "list the pods as they were at this time (RFC 3339, or a duration ago like 10m)")
	completeOutput(cmd, outputWide, outputJSON, outputYAML)
	cli.AnnotateEnv(fs)
	return cmd
}

// matches says whether st is in the namespace (or any, with -A) and of the
// name when one is given.
func (o *getPodsOptions) matches(st *schemas.PodStatus, name string) bool {
	return (o.allNamespaces || st.Namespace == o.namespace) && (name == "" || st.Name == name)
}

// listed says whether the list shows st: it matches, and is Terminated only
// with -a.
func (o *getPodsOptions) listed(st *schemas.PodStatus, name string) bool {
	return o.matches(st, name) && (o.showAll || st.Phase != schemas.PhaseTerminated)
}

func (o *getPodsOptions) run(cmd *cobra.Command, args []string) error {
	if err := checkOutput(o.output, outputWide, outputJSON, outputYAML); err != nil {
		return err
	}
	if o.allNamespaces && cmd.Flags().Changed("namespace") {
		return fmt.Errorf("give -n NAMESPACE or -A, not both")
	}
	if o.watch && o.output == outputYAML {
		return fmt.Errorf("-w prints JSON lines with -o json; -o yaml cannot stream")
	}
	var at time.Time
	if o.at != "" {
		if o.watch {
			return fmt.Errorf("give --at or -w, not both")
		}
		var err error
		if at, err = parseAt(o.at, time.Now()); err != nil {
			return err
		}
	}
	name := ""
	if len(args) == 1 {
		name = args[0]
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	if o.watch {
		return o.watchPods(cmd, c, name)
	}
	all, err := o.statuses(ctx, c, at)
	if err != nil {
		return err
	}
	var pods []schemas.PodStatus
	hidden := 0
	for i := range all {
		switch {
		case o.listed(&all[i], name):
			pods = append(pods, all[i])
		case o.matches(&all[i], name):
			hidden++ // Terminated, without -a
		}
	}
	sortStatuses(pods)
	w := cmd.OutOrStdout()
	if o.output == outputJSON || o.output == outputYAML {
		return printList(w, o.output, "PodStatusList", pods)
	}
	if len(pods) == 0 {
		return o.noPods(cmd, name, hidden)
	}
	rows, err := o.rows(ctx, c, pods, at)
	if err != nil {
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, strings.Join(o.header(), "\t"))
	for _, row := range rows {
		writeRow(tw, row...)
	}
	return tw.Flush()
}

// noPods says that nothing matched, and why when deleted pods were hidden.
func (o *getPodsOptions) noPods(cmd *cobra.Command, name string, hidden int) error {
	where := ""
	if !o.allNamespaces {
		where = " in namespace " + o.namespace
	}
	if o.client.node != "" {
		where += " on node " + o.client.node
	}
	if name != "" {
		msg := fmt.Sprintf("pod %q not found%s", name, where)
		if hidden > 0 {
			msg += " (it was deleted: -a shows its last status)"
		}
		return &jc.NotFoundError{Msg: msg}
	}
	more := ""
	if hidden > 0 {
		more = fmt.Sprintf(" (%d deleted: -a shows them)", hidden)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "No pods found%s%s.\n", where, more)
	return nil
}

func sortStatuses(pods []schemas.PodStatus) {
	slices.SortFunc(pods, func(a, b schemas.PodStatus) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Node, b.Node), cmp.Compare(a.UID, b.UID))
	})
}

func (o *getPodsOptions) header() []string {
	h := []string{"NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "NODE"}
	if o.output == outputWide {
		h = append(h, "UID", "IP", "REVISION")
	}
	return h
}

// rows renders pods as table rows, with what the table needs besides the
// statuses: the nodes' liveness and each pod's first intent. With at set,
// the pods as they were then: ages to at, and no node's liveness.
func (o *getPodsOptions) rows(ctx context.Context, c *jc.Client, pods []schemas.PodStatus, at time.Time) ([][]string, error) {
	if !at.IsZero() {
		return o.rowsAt(ctx, c, pods, at), nil
	}
	nodes, err := nodeStates(ctx, c, o.client.node, pods)
	if err != nil {
		return nil, err
	}
	ages := c.NewPodAges(ctx)
	now := time.Now()
	rows := make([][]string, len(pods))
	for i := range pods {
		rows[i] = o.row(&pods[i], nodes[pods[i].Node].Live(now), podSince(ctx, ages, &pods[i]), now)
	}
	return rows, nil
}

func (o *getPodsOptions) row(p *schemas.PodStatus, nodeLive bool, start, now time.Time) []string {
	status := podStatusText(p)
	if phase, unknown := podPhaseShown(p, nodeLive); unknown {
		status = string(phase)
	}
	row := []string{p.Namespace, p.Name, podReady(p), status, strconv.Itoa(int(podRestarts(p))), ageSince(start, now), p.Node}
	if o.output == outputWide {
		ip := ""
		if p.Sandbox != nil && len(p.Sandbox.IPs) > 0 {
			ip = p.Sandbox.IPs[0]
		}
		row = append(row, p.UID, ip, strconv.FormatInt(p.Revision, 10))
	}
	return row
}

// watchPods prints the pods as run does, then a line per change of a pod
// the list wants, until ctx is done (which ends it without an error). A pod
// that goes Terminated gets its line even without -a: that is the change.
func (o *getPodsOptions) watchPods(cmd *cobra.Command, c *jc.Client, name string) error {
	ctx := cmd.Context()
	table := &streamTable{w: cmd.OutOrStdout()}
	ages := c.NewPodAges(ctx)
	return c.WatchStatuses(ctx, o.client.node, func(statuses []schemas.PodStatus, initial bool) error {
		var pods []schemas.PodStatus
		for i := range statuses {
			if (initial && o.listed(&statuses[i], name)) || (!initial && o.matches(&statuses[i], name)) {
				pods = append(pods, statuses[i])
			}
		}
		if initial {
			sortStatuses(pods)
		} else if len(pods) == 0 {
			return nil
		}
		return o.printWatched(ctx, c, table, ages, pods, initial)
	})
}

// printWatched prints pods as watch lines: JSON lines with -o json, else
// table rows (the header first with the initial list).
func (o *getPodsOptions) printWatched(ctx context.Context, c *jc.Client, table *streamTable, ages *jc.PodAges, pods []schemas.PodStatus, first bool) error {
	if o.output == outputJSON {
		for i := range pods {
			data, err := json.Marshal(&pods[i])
			if err != nil {
				return err
			}
			fmt.Fprintf(table.w, "%s\n", data)
		}
		return nil
	}
	nodes, err := nodeStates(ctx, c, o.client.node, pods)
	if err != nil {
		return err
	}
	now := time.Now()
	var rows [][]string
	for i := range pods {
		rows = append(rows, o.row(&pods[i], nodes[pods[i].Node].Live(now), podSince(ctx, ages, &pods[i]), now))
	}
	if first {
		table.fit(o.header()...)
		for _, r := range rows {
			table.fit(r...)
		}
		table.row(o.header()...)
	}
	for _, r := range rows {
		table.row(r...)
	}
	return nil
}

// podSince is when p was first asked for (ages), else its earliest
// container start, else when its status was taken.
func podSince(ctx context.Context, ages *jc.PodAges, p *schemas.PodStatus) time.Time {
	if t := ages.Since(ctx, p); !t.IsZero() {
		return t
	}
	return podStart(p)
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

// podStart is the earliest container start, else when the status was taken:
// a pod's age when its intents are gone from JETLET_INTENTS.
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
// container or a container says better what the pod is doing; a Failed
// pod's reason when it has one (OutOfmemory for a pod refused at admission,
// Evicted, DeadlineExceeded).
func podStatusText(p *schemas.PodStatus) string {
	reason := string(p.Phase)
	switch {
	case p.Phase == schemas.PhaseTerminating || p.Phase == schemas.PhaseTerminated:
		return reason
	case p.Phase == schemas.PhaseFailed && p.Reason != "":
		return p.Reason
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
