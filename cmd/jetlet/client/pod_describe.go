package client

import (
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

// describeEvents is how many of the newest events of a pod, or of a node's
// pods, describe shows.
const describeEvents = 20

type describeOptions struct {
	client clientFlags
	uid    string
	at     string
}

func newDescribeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe pod NAMESPACE/NAME | --uid UID | node NAME",
		Short: "Show a pod or a node in detail",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("describe what? `jetlet describe pod NAMESPACE/NAME` or `jetlet describe node NAME`")
		},
	}
	var o describeOptions
	pod := &cobra.Command{
		Use:     "pod NAMESPACE/NAME | --uid UID",
		Aliases: []string{"pods", "po"},
		Short:   "Show a pod in detail",
		Long: `Show a pod as kubectl describe does: where it runs, its phase (with the
reason and message of a Failed one: an admission refusal, an eviction) and
conditions, each container's state, last termination, restart count and
probes (from the spec of its newest apply intent), and its newest events
(from JETLET_EVENTS). NAMESPACE/NAME describes every uid of that name still
known, oldest first.

--at TIME (RFC 3339, or a duration ago like 10m) describes the pod as it was
then: the status its newest result finished by TIME carried (from
JETLET_RESULTS, as get pods --at), and its newest events up to TIME.`,
		Example: `  jetlet describe pod default/web
  jetlet describe pod default/web --at 2026-11-30T02:00:00Z`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	fs := pod.Flags()
	o.client.register(fs)
	fs.StringVar(&o.uid, "uid", "", "the pod's uid, instead of NAMESPACE/NAME")
	fs.StringVar(&o.at, "at", "", "describe the pod as it was at this time (RFC 3339, or a duration ago like 10m)")
	cli.AnnotateEnv(fs)
	cmd.AddCommand(pod, newDescribeNodeCommand())
	return cmd
}

func (o *describeOptions) run(cmd *cobra.Command, args []string) error {
	var at time.Time
	if o.at != "" {
		var err error
		if at, err = parseAt(o.at, time.Now()); err != nil {
			return err
		}
	}
	c, pods, err := namedPods(cmd, &o.client, args, o.uid)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	w := cmd.OutOrStdout()
	for i, p := range pods {
		if i > 0 {
			fmt.Fprintln(w)
		}
		now := time.Now()
		if !at.IsZero() {
			if p, err = c.PodThen(ctx, p, at); err != nil {
				return err
			}
			now = at
		}
		spec, err := c.AppliedSpec(ctx, p)
		if err != nil {
			return err
		}
		events, err := c.NewestEvents(ctx, p.Node, p.UID, describeEvents, false, at)
		if err != nil {
			return err
		}
		describePod(w, p, spec, events, now)
	}
	return nil
}

// describePod prints one pod; spec (nil when no apply intent is kept) gives
// the pod-level resources, the containers' and the probes.
func describePod(w io.Writer, p *jc.Pod, spec *corev1.PodSpec, events []schemas.LifecycleEvent, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	field := func(indent int, name, value string) {
		fmt.Fprintf(tw, "%s%s:\t%s\n", strings.Repeat("  ", indent), name, orNone(value))
	}
	st := p.Status
	field(0, "Name", p.Name)
	field(0, "Namespace", p.Namespace)
	field(0, "UID", p.UID)
	field(0, "Node", p.Node)
	if st == nil {
		field(0, "Status", "no status yet")
	} else {
		field(0, "Status", podStatusText(st))
		field(0, "Phase", string(st.Phase))
		if st.Reason != "" {
			field(0, "Reason", st.Reason)
		}
		if st.Message != "" {
			field(0, "Message", oneLine(st.Message))
		}
		ip := ""
		if st.Sandbox != nil && len(st.Sandbox.IPs) > 0 {
			ip = strings.Join(st.Sandbox.IPs, ", ")
		}
		field(0, "IP", ip)
		field(0, "Revision", strconv.FormatInt(st.Revision, 10))
		field(0, "Intent", strconv.FormatUint(st.IntentSeq, 10))
		field(0, "Observed", formatTime(st.ObservedAt))
	}
	if p.LastIntent != nil && p.LastIntent.Op == schemas.OpDelete {
		field(0, "Deleted", "by intent "+strconv.FormatUint(p.LastIntent.Seq, 10))
	}
	// Pod-level resources (KEP-2837), as the spec asks them.
	if spec != nil && spec.Resources != nil {
		if len(spec.Resources.Limits) > 0 {
			field(0, "Pod Limits", resourceList(spec.Resources.Limits))
		}
		if len(spec.Resources.Requests) > 0 {
			field(0, "Pod Requests", resourceList(spec.Resources.Requests))
		}
	}
	tw.Flush()

	if st != nil && len(st.Conditions) > 0 {
		fmt.Fprintln(w, "Conditions:")
		ct := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
		messages := slices.ContainsFunc(st.Conditions, func(c schemas.PodCondition) bool { return c.Message != "" })
		header := "  TYPE\tSTATUS\tREASON\tLAST TRANSITION"
		if messages {
			header += "\tMESSAGE"
		}
		fmt.Fprintln(ct, header)
		for _, c := range st.Conditions {
			row := fmt.Sprintf("  %s\t%s\t%s\t%s", c.Type, c.Status, orNone(c.Reason), formatTime(c.LastTransitionTime))
			if messages {
				row += "\t" + orNone(oneLine(c.Message))
			}
			fmt.Fprintln(ct, row)
		}
		ct.Flush()
	}
	if st != nil {
		describeContainers(w, "Init Containers", st.InitContainers, specContainers(spec, true), now)
		describeContainers(w, "Containers", st.Containers, specContainers(spec, false), now)
	}

	writeEventsSection(w, events, false, now)
}

// writeEventsSection writes describe's Events section, oldest first; withPod
// adds the pod of each, for a node's.
func writeEventsSection(w io.Writer, events []schemas.LifecycleEvent, withPod bool, now time.Time) {
	header := []string{"AGE", "TYPE", "CONTAINER", "REASON/EXIT", "MESSAGE"}
	if withPod {
		header = slices.Insert(header, 1, "POD")
	}
	rows := make([][]string, len(events))
	for i := range events {
		ev := &events[i]
		rows[i] = []string{ageSince(ev.Time, now), string(ev.Type), orNone(ev.Container), orNone(eventReason(ev)), oneLine(ev.Message)}
		if withPod {
			rows[i] = slices.Insert(rows[i], 1, ev.Namespace+"/"+ev.Pod)
		}
	}
	writeTableSection(w, "Events", header, rows)
}

// writeTableSection writes a section of describe: its title, then the rows
// under the header as an indented table, or "<none>" without rows.
func writeTableSection(w io.Writer, title string, header []string, rows [][]string) {
	fmt.Fprintf(w, "%s:\n", title)
	if len(rows) == 0 {
		fmt.Fprintln(w, "  <none>")
		return
	}
	tw := newTable(w)
	for _, row := range slices.Concat([][]string{header}, rows) {
		fmt.Fprintln(tw, "  "+strings.Join(row, "\t"))
	}
	tw.Flush()
}

func specContainers(spec *corev1.PodSpec, init bool) map[string]*corev1.Container {
	out := map[string]*corev1.Container{}
	if spec == nil {
		return out
	}
	list := spec.Containers
	if init {
		list = spec.InitContainers
	}
	for i := range list {
		out[list[i].Name] = &list[i]
	}
	return out
}

func describeContainers(w io.Writer, title string, statuses []schemas.ContainerStatus, specs map[string]*corev1.Container, now time.Time) {
	if len(statuses) == 0 {
		return
	}
	fmt.Fprintf(w, "%s:\n", title)
	tw := tabwriter.NewWriter(w, 0, 8, 1, ' ', 0)
	field := func(indent int, name, value string) {
		fmt.Fprintf(tw, "%s%s:\t%s\n", strings.Repeat("  ", indent), name, value)
	}
	for _, cs := range statuses {
		fmt.Fprintf(tw, "  %s:\n", cs.Name)
		field(2, "Container ID", orNone(cs.ContainerID))
		field(2, "Image", cs.Image)
		field(2, "State", string(cs.State))
		if cs.Reason != "" {
			field(3, "Reason", cs.Reason)
		}
		if cs.State == schemas.ContainerExited {
			field(3, "Exit Code", strconv.Itoa(int(cs.ExitCode)))
		}
		if cs.Message != "" {
			field(3, "Message", oneLine(cs.Message))
		}
		// A waiting container's times are its previous instance's: Last State.
		if cs.State != schemas.ContainerWaiting && cs.StartedAt != "" {
			field(3, "Started", cs.StartedAt)
		}
		if cs.State == schemas.ContainerExited && cs.FinishedAt != "" {
			field(3, "Finished", cs.FinishedAt)
		}
		if ls := cs.LastState; ls != nil {
			field(2, "Last State", "Terminated")
			field(3, "Reason", orNone(ls.Reason))
			field(3, "Exit Code", strconv.Itoa(int(ls.ExitCode)))
			if ls.Message != "" {
				field(3, "Message", oneLine(ls.Message))
			}
			field(3, "Finished", orNone(ls.FinishedAt))
		}
		field(2, "Ready", strconv.FormatBool(cs.Ready))
		field(2, "Started", strconv.FormatBool(cs.Started))
		field(2, "Restart Count", strconv.Itoa(int(cs.RestartCount)))
		// What the spec asks, what the node allocated, what the runtime
		// applied: they differ while a resize is pending or in progress.
		if spec := specs[cs.Name]; spec != nil {
			if len(spec.Resources.Limits) > 0 {
				field(2, "Limits", resourceList(spec.Resources.Limits))
			}
			if len(spec.Resources.Requests) > 0 {
				field(2, "Requests", resourceList(spec.Resources.Requests))
			}
		}
		if len(cs.AllocatedResources) > 0 {
			field(2, "Allocated Requests", resourceList(cs.AllocatedResources))
		}
		if r := cs.Resources; r != nil {
			field(2, "Applied Limits", orNone(resourceList(r.Limits)))
			field(2, "Applied Requests", orNone(resourceList(r.Requests)))
		}
		if spec := specs[cs.Name]; spec != nil {
			for _, pr := range []struct {
				name  string
				probe *corev1.Probe
			}{{"Liveness", spec.LivenessProbe}, {"Readiness", spec.ReadinessProbe}, {"Startup", spec.StartupProbe}} {
				if pr.probe != nil {
					field(2, pr.name, probeText(pr.probe))
				}
			}
		}
	}
	tw.Flush()
}

// probeText is kubectl describe's one-line probe: the handler, then
// delay, timeout, period and thresholds.
func probeText(p *corev1.Probe) string {
	var h string
	switch {
	case p.Exec != nil:
		h = "exec [" + strings.Join(p.Exec.Command, " ") + "]"
	case p.HTTPGet != nil:
		g := p.HTTPGet
		scheme := strings.ToLower(string(g.Scheme))
		if scheme == "" {
			scheme = "http"
		}
		h = fmt.Sprintf("http-get %s://%s:%s%s", scheme, g.Host, g.Port.String(), g.Path)
	case p.TCPSocket != nil:
		h = fmt.Sprintf("tcp-socket %s:%s", p.TCPSocket.Host, p.TCPSocket.Port.String())
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		h = fmt.Sprintf("grpc <pod>:%d %s", p.GRPC.Port, service)
	default:
		h = "unknown"
	}
	return fmt.Sprintf("%s delay=%ds timeout=%ds period=%ds #success=%d #failure=%d",
		h, p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.SuccessThreshold, p.FailureThreshold)
}

// resourceList is "cpu=500m, memory=128Mi", in name order.
func resourceList(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		parts = append(parts, string(name)+"="+q.String())
	}
	return strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
