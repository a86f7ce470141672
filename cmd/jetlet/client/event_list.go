package client

import (
	"bytes"
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
	fs.StringVar(&o.typ, "type", "", "only events of this type ("+jc.EventTypeList()+")")
	fs.StringVar(&o.since, "since", "", "only events since a duration ago (10m, 2h) or an RFC 3339 time")
	fs.BoolVarP(&o.follow, "follow", "f", false, "keep printing new events until interrupted")
	fs.StringVarP(&o.output, "output", "o", "", "json (one event a line), cloudevents (one structured-mode CloudEvent a line) or wide (adds NODE and UID)")
	completeOutput(cmd, outputJSON, outputCloudEvents, outputWide)
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(strings.Split(jc.EventTypeList(), ", "), cobra.ShellCompDirectiveNoFileComp))
	cli.AnnotateEnv(fs)
	return cmd
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
	typ, err := jc.ParseEventType(o.typ)
	if err != nil {
		return err
	}
	opts := jc.EventsOptions{Node: o.client.node, Type: typ}
	if o.since != "" {
		if opts.Since, err = parseSince(o.since, time.Now()); err != nil {
			return err
		}
	}
	if o.pod != "" || o.uid != "" {
		var args []string
		if o.pod != "" {
			args = []string{o.pod}
		}
		r, err := parsePodRef(args, o.uid)
		if err != nil {
			return fmt.Errorf("--pod or --uid: %w", err)
		}
		opts.Pod = &r
	}
	o.client.longLived = o.follow
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()

	// What is stored now, aligned as one table; then, with --follow, what comes.
	var backlog []*jc.Event
	err = c.Events(ctx, opts, func(e *jc.Event) error {
		backlog = append(backlog, e)
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
	for _, e := range backlog {
		out.print(e)
	}
	if !o.follow {
		return nil
	}
	// On after the last event shown. With none shown, the backlog's own start
	// is right: nothing matched up to where it ended.
	if n := len(backlog); n > 0 {
		opts.After = backlog[n-1].Seq
	}
	opts.Follow = true
	return c.Events(ctx, opts, func(e *jc.Event) error {
		out.print(e)
		return nil
	})
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
func (p *eventPrinter) begin(backlog []*jc.Event, follow bool) {
	if p.lines() {
		return
	}
	if follow {
		p.table.fit(p.cells(typicalEvent())...)
	}
	for _, e := range backlog {
		p.table.fit(p.cells(&e.LifecycleEvent)...)
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

func (p *eventPrinter) print(e *jc.Event) {
	if !p.lines() {
		p.table.row(p.cells(&e.LifecycleEvent)...)
		return
	}
	var data []byte
	if p.output == outputCloudEvents {
		data, _ = json.Marshal(e.CloudEvent())
	} else {
		var b bytes.Buffer
		if json.Compact(&b, e.Raw) != nil {
			b.Reset()
			raw, _ := json.Marshal(&e.LifecycleEvent)
			b.Write(raw)
		}
		data = b.Bytes()
	}
	_, _ = p.w.Write(append(data, '\n'))
}

// oneLine keeps a table row on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
