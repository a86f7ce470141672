package client

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

type describeNodeOptions struct{ client clientFlags }

func newDescribeNodeCommand() *cobra.Command {
	var o describeNodeOptions
	cmd := &cobra.Command{
		Use:     "node NAME",
		Aliases: []string{"nodes", "no"},
		Short:   "Show a node in detail",
		Long: `Show a node as kubectl describe node does, from its record in jetlet_nodes:
status, labels, taints, conditions, addresses, capacity, allocatable and
system info; then its non-terminated pods (from jetlet_status) with the
requests and limits of their newest apply intent, each with its percent of
allocatable, and their totals; the images it holds; and the newest
lifecycle events of its pods (the newest of each pod and type: nodes
publish no events of their own).`,
		Example: `  jetlet describe node n1`,
		Args:    cobra.ExactArgs(1),
		RunE:    func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	o.client.register(cmd.Flags())
	cli.AnnotateEnv(cmd.Flags())
	return cmd
}

func (o *describeNodeOptions) run(cmd *cobra.Command, name string) error {
	c, node, statuses, err := namedNode(cmd, &o.client, name)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	if node == nil {
		return &jc.NotFoundError{Msg: fmt.Sprintf("node %s not found: no record in %s and no pods in %s", name, schemas.BucketNodes, schemas.BucketStatus)}
	}
	pods, err := nodePodResources(ctx, c, statuses)
	if err != nil {
		return err
	}
	events, err := c.NewestEvents(ctx, name, "*", describeEvents, true, time.Time{})
	if err != nil {
		return err
	}
	describeNode(cmd.OutOrStdout(), node, pods, events, time.Now())
	return nil
}

// nodePodResources returns the pods of statuses that are not terminal, in
// namespace and name order, with the requests and limits of their newest
// apply intent.
func nodePodResources(ctx context.Context, c *jc.Client, statuses []schemas.PodStatus) ([]jc.PodResources, error) {
	var pods []schemas.PodStatus
	for _, st := range statuses {
		switch st.Phase {
		case schemas.PhaseSucceeded, schemas.PhaseFailed, schemas.PhaseTerminated:
		default:
			pods = append(pods, st)
		}
	}
	sortStatuses(pods)
	out, err := c.PodResourcesOf(ctx, pods)
	for i := range out {
		if out[i].Since.IsZero() {
			out[i].Since = podStart(out[i].Status)
		}
	}
	return out, err
}

// describeNode prints one node. Without a record (expired, or deleted by a
// clean stop) only its status and its pods are known.
func describeNode(w io.Writer, n *jc.Node, pods []jc.PodResources, events []schemas.LifecycleEvent, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	field := func(name, value string) { fmt.Fprintf(tw, "%s:\t%s\n", name, orNone(value)) }
	// more continues the value of the field above on a line of its own.
	more := func(value string) { fmt.Fprintf(tw, "\t%s\n", value) }
	r := n.Record
	field("Name", n.Name)
	field("Status", nodeStatus(n, now))
	field("Heartbeat", nodeHeartbeat(n, now))
	if r == nil {
		field("Record", "none in "+schemas.BucketNodes+": only its pods are known")
		tw.Flush()
		describeNodePods(w, pods, nil, now)
		writeEventsSection(w, events, true, now)
		return
	}
	labels := make([]string, 0, len(r.Labels))
	for _, k := range slices.Sorted(maps.Keys(r.Labels)) {
		labels = append(labels, k+"="+r.Labels[k])
	}
	taints := make([]string, 0, len(r.Taints))
	for _, t := range r.Taints {
		taints = append(taints, t.ToString())
	}
	for _, multi := range []struct {
		name   string
		values []string
	}{{"Labels", labels}, {"Taints", taints}} {
		if len(multi.values) == 0 {
			field(multi.name, "")
			continue
		}
		field(multi.name, multi.values[0])
		for _, v := range multi.values[1:] {
			more(v)
		}
	}
	field("Unschedulable", strconv.FormatBool(r.Unschedulable))
	field("Started", formatTime(r.StartedAt))
	tw.Flush()

	var conditions [][]string
	for _, c := range r.Conditions {
		conditions = append(conditions, []string{string(c.Type), string(c.Status), orNone(formatTime(c.LastTransitionTime)), orNone(c.Reason), oneLine(c.Message)})
	}
	writeTableSection(w, "Conditions", []string{"TYPE", "STATUS", "LAST TRANSITION", "REASON", "MESSAGE"}, conditions)
	section := func(title string, rows [][2]string) {
		fmt.Fprintf(w, "%s:\n", title)
		st := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
		for _, row := range rows {
			fmt.Fprintf(st, "  %s:\t%s\n", row[0], orNone(row[1]))
		}
		if len(rows) == 0 {
			fmt.Fprintln(st, "  <none>")
		}
		st.Flush()
	}
	var addresses [][2]string
	for _, a := range r.Addresses {
		addresses = append(addresses, [2]string{string(a.Type), a.Address})
	}
	section("Addresses", addresses)
	for _, list := range []struct {
		title string
		list  corev1.ResourceList
	}{{"Capacity", r.Capacity}, {"Allocatable", r.Allocatable}} {
		var rows [][2]string
		for _, name := range slices.Sorted(maps.Keys(list.list)) {
			q := list.list[name]
			rows = append(rows, [2]string{string(name), q.String()})
		}
		section(list.title, rows)
	}
	runtime := ""
	if r.RuntimeName != "" {
		runtime = r.RuntimeName + "://" + r.RuntimeVersion
	}
	section("System Info", [][2]string{
		{"Container Runtime Version", runtime},
		{"Runtime API Version", r.RuntimeAPIVersion},
		{"Runtime Endpoint", r.RuntimeEndpoint},
		{"Jetlet Version", r.JetletVersion},
		{"Isolation", string(r.Isolation)},
	})
	allocatable := r.Capacity
	if len(r.Allocatable) > 0 {
		allocatable = r.Allocatable
	}
	describeNodePods(w, pods, allocatable, now)

	var images [][]string
	for _, im := range r.Images {
		images = append(images, []string{strings.Join(im.Names, ", "), humanBytes(im.SizeBytes)})
	}
	writeTableSection(w, "Images", []string{"NAMES", "SIZE"}, images)
	writeEventsSection(w, events, true, now)
}

// describeNodePods prints kubectl describe node's Non-terminated Pods and
// Allocated resources: each pod's CPU and memory requests and limits, then
// the totals, each with its percent of allocatable (0% where the node does
// not say it).
func describeNodePods(w io.Writer, pods []jc.PodResources, allocatable corev1.ResourceList, now time.Time) {
	fmt.Fprintf(w, "Non-terminated Pods: (%d in total)\n", len(pods))
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	if len(pods) > 0 {
		pt := newTable(w)
		fmt.Fprintln(pt, "  NAMESPACE\tNAME\tCPU REQUESTS\tCPU LIMITS\tMEMORY REQUESTS\tMEMORY LIMITS\tAGE")
		for _, p := range pods {
			cells := []string{"<unknown>", "<unknown>", "<unknown>", "<unknown>"}
			if p.Known {
				cells = []string{
					shareOf(p.Requests[corev1.ResourceCPU], allocatable[corev1.ResourceCPU]),
					shareOf(p.Limits[corev1.ResourceCPU], allocatable[corev1.ResourceCPU]),
					shareOf(p.Requests[corev1.ResourceMemory], allocatable[corev1.ResourceMemory]),
					shareOf(p.Limits[corev1.ResourceMemory], allocatable[corev1.ResourceMemory]),
				}
				addResources(requests, p.Requests)
				addResources(limits, p.Limits)
			}
			fmt.Fprintf(pt, "  %s\t%s\t%s\t%s\n", p.Status.Namespace, p.Status.Name, strings.Join(cells, "\t"), ageSince(p.Since, now))
		}
		pt.Flush()
	}
	fmt.Fprintln(w, "Allocated resources:")
	fmt.Fprintln(w, "  (Total limits may be over 100 percent, i.e., overcommitted.)")
	at := newTable(w)
	fmt.Fprintln(at, "  RESOURCE\tREQUESTS\tLIMITS")
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		fmt.Fprintf(at, "  %s\t%s\t%s\n", name, shareOf(requests[name], allocatable[name]), shareOf(limits[name], allocatable[name]))
	}
	at.Flush()
}

// addResources adds each quantity of more to total's.
func addResources(total, more corev1.ResourceList) {
	for name, q := range more {
		sum := total[name]
		sum.Add(q)
		total[name] = sum
	}
}
