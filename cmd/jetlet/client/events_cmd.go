package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

type eventsOptions struct {
	client clientFlags
	pod    string
	uid    string
	typ    string
	since  string
	follow bool
	output string
}

func newEventsCommand() *cobra.Command {
	var o eventsOptions
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Show container and sandbox lifecycle events from JETLET_EVENTS",
		Long: `Show lifecycle events, oldest first, read with an ordered consumer on
JETLET_EVENTS whose subject filter is built from the flags
(<prefix>.event.<node|*>.<uid|*>.<type|*>). --pod NAMESPACE/NAME covers every
uid that name had. Without --follow it stops at the end of the stream; with
--follow it prints events as they come until interrupted (Ctrl-C).

-o json prints one event a line, as stored, for jq and grep. -o cloudevents
prints one CloudEvent a line in structured mode (CloudEvents 1.0's JSON
format: specversion, id, source jetlet/<node>, type dev.jetlet.<Type>, time,
subject <namespace>/<pod>, datacontenttype, and the event as stored as data),
for tools that speak CloudEvents.`,
		Example: `  jetlet events --pod default/web
  jetlet events --type ContainerDied --since 1h
  jetlet events --follow -o json | jq .reason
  jetlet events --follow -o cloudevents | jq -c '{type, subject}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVar(&o.pod, "pod", "", "only this pod's events: NAMESPACE/NAME")
	fs.StringVar(&o.uid, "uid", "", "only the events of the pod with this uid")
	fs.StringVar(&o.typ, "type", "", "only events of this type ("+eventTypeList()+")")
	fs.StringVar(&o.since, "since", "", "only events since a duration ago (10m, 2h) or an RFC 3339 time")
	fs.BoolVarP(&o.follow, "follow", "f", false, "keep printing new events until interrupted")
	fs.StringVarP(&o.output, "output", "o", "", "json (one event a line), cloudevents (one structured-mode CloudEvent a line) or wide (adds NODE and UID)")
	completeOutput(cmd, outputJSON, outputCloudEvents, outputWide)
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(strings.Split(eventTypeList(), ", "), cobra.ShellCompDirectiveNoFileComp))
	cli.AnnotateEnv(fs)
	return cmd
}

func eventTypeList() string {
	names := make([]string, len(schemas.EventTypes))
	for i, t := range schemas.EventTypes {
		names[i] = string(t)
	}
	return strings.Join(names, ", ")
}

// parseEventType accepts a type in any letter case; none is "*", a subject
// wildcard.
func parseEventType(s string) (schemas.EventType, error) {
	if s == "" {
		return "*", nil
	}
	for _, t := range schemas.EventTypes {
		if strings.EqualFold(string(t), s) {
			return t, nil
		}
	}
	return "", fmt.Errorf("--type %q: want one of %s", s, eventTypeList())
}

// parseSince reads a duration ago or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want a duration like 10m or 2h, or an RFC 3339 time like 2025-01-02T15:04:05Z", s)
}

func (o *eventsOptions) run(cmd *cobra.Command) error {
	if err := checkOutput(o.output, outputJSON, outputCloudEvents, outputWide); err != nil {
		return err
	}
	typ, err := parseEventType(o.typ)
	if err != nil {
		return err
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if o.since != "" {
		t, err := parseSince(o.since, time.Now())
		if err != nil {
			return err
		}
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	}
	var ref *podRef
	if o.pod != "" || o.uid != "" {
		var args []string
		if o.pod != "" {
			args = []string{o.pod}
		}
		r, err := parsePodRef(args, o.uid)
		if err != nil {
			return fmt.Errorf("--pod or --uid: %w", err)
		}
		ref = &r
	}
	o.client.longLived = o.follow
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.close()
	ctx := cmd.Context()

	cfg.FilterSubjects = []string{c.subj.Event(nodeToken(o.client.node), "*", typ)}
	if ref != nil {
		if cfg.FilterSubjects, err = o.podFilters(ctx, c, *ref, typ); err != nil {
			return err
		}
	}
	// What is stored now, aligned as one table; then, with --follow, what comes.
	var backlog []*schemas.LifecycleEvent
	var raws [][]byte
	var last uint64
	err = c.readStream(ctx, schemas.StreamEvents, cfg, false, func(msg jetstream.Msg) error {
		if md, err := msg.Metadata(); err == nil {
			last = md.Sequence.Stream
		}
		var ev schemas.LifecycleEvent
		if json.Unmarshal(msg.Data(), &ev) == nil {
			backlog, raws = append(backlog, &ev), append(raws, msg.Data())
		}
		return nil
	})
	if err != nil {
		return err
	}
	out := &eventPrinter{w: cmd.OutOrStdout(), output: o.output, table: &streamTable{w: cmd.OutOrStdout()}}
	if len(backlog) == 0 && !o.follow && !out.lines() {
		fmt.Fprintln(cmd.ErrOrStderr(), "No events found.")
		return nil
	}
	out.begin(backlog, o.follow)
	for i, ev := range backlog {
		out.print(ev, raws[i])
	}
	if !o.follow {
		return nil
	}
	// On after the last event shown. With none shown, the backlog's own start
	// is right: nothing matched up to where it ended.
	if last > 0 {
		cfg.DeliverPolicy, cfg.OptStartTime, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, nil, last+1
	}
	return c.readStream(ctx, schemas.StreamEvents, cfg, true, func(msg jetstream.Msg) error {
		var ev schemas.LifecycleEvent
		if json.Unmarshal(msg.Data(), &ev) == nil {
			out.print(&ev, msg.Data())
		}
		return nil
	})
}

// podFilters are the event subjects of every uid ref names (on --node, or on
// any node).
func (o *eventsOptions) podFilters(ctx context.Context, c *client, ref podRef, typ schemas.EventType) ([]string, error) {
	if ref.UID != "" {
		// A uid is enough: no need to know its node.
		return []string{c.subj.Event(nodeToken(o.client.node), ref.UID, typ)}, nil
	}
	pods, err := c.findPods(ctx, o.client.node, ref)
	if err != nil {
		return nil, err
	}
	if len(pods) == 0 {
		return nil, notFound(ref, o.client.node)
	}
	var filters []string
	for _, p := range pods {
		f := c.subj.Event(p.Node, p.UID, typ)
		if !slices.Contains(filters, f) {
			filters = append(filters, f)
		}
	}
	return filters, nil
}

// outputCloudEvents prints each event as a CloudEvent in structured mode.
const outputCloudEvents = "cloudevents"

// eventPrinter prints events as a table, as JSON lines or as CloudEvents.
type eventPrinter struct {
	w      io.Writer
	output string
	table  *streamTable
}

// lines: one JSON object a line, no header (json, cloudevents).
func (p *eventPrinter) lines() bool {
	return p.output == outputJSON || p.output == outputCloudEvents
}

func (p *eventPrinter) header() []string {
	h := []string{"TIME", "TYPE", "POD", "CONTAINER", "REASON/EXIT", "MESSAGE"}
	if p.output == outputWide {
		h = slices.Insert(h, 5, "NODE", "UID", "ATTEMPT")
	}
	return h
}

func (p *eventPrinter) cells(ev *schemas.LifecycleEvent) []string {
	row := []string{formatTime(ev.Time), string(ev.Type), ev.Namespace + "/" + ev.Pod, ev.Container, eventReason(ev), oneLine(ev.Message)}
	if p.output == outputWide {
		row = slices.Insert(row, 5, ev.Node, ev.UID, strconv.FormatUint(uint64(ev.Attempt), 10))
	}
	return row
}

// begin sizes the table's columns to the events already in hand and prints
// its header. A follow also sizes them for the events to come, which it
// cannot see yet: at least a typical event's widths (a longer cell widens
// its column from its row on).
func (p *eventPrinter) begin(backlog []*schemas.LifecycleEvent, follow bool) {
	if p.lines() {
		return
	}
	if follow {
		p.table.fit(p.cells(typicalEvent())...)
	}
	for _, ev := range backlog {
		p.table.fit(p.cells(ev)...)
	}
	p.table.row(p.header()...)
}

// typicalEvent has a cell as wide as most events' in each column.
func typicalEvent() *schemas.LifecycleEvent {
	longest := schemas.EventType("")
	for _, t := range schemas.EventTypes {
		if len(t) > len(longest) {
			longest = t
		}
	}
	exit := int32(137)
	return &schemas.LifecycleEvent{
		Time: time.Now(), Type: longest,
		Namespace: "default", Pod: strings.Repeat("x", 16), Container: strings.Repeat("x", 12),
		Reason: "Completed", ExitCode: &exit,
		Node: strings.Repeat("x", 8), UID: strings.Repeat("x", 36), Attempt: 10,
	}
}

func (p *eventPrinter) print(ev *schemas.LifecycleEvent, raw []byte) {
	if !p.lines() {
		p.table.row(p.cells(ev)...)
		return
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		data, _ := json.Marshal(ev)
		b.Write(data)
	}
	if p.output == outputCloudEvents {
		ce := schemas.CloudEventOf(ev)
		ce.Data = b.Bytes()
		data, _ := json.Marshal(ce)
		b.Reset()
		b.Write(data)
	}
	b.WriteByte('\n')
	_, _ = p.w.Write(b.Bytes())
}

// oneLine keeps a table row on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
