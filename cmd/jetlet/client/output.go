package client

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// Output formats of the -o flag.
const (
	outputTable = ""
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// checkOutput rejects an -o value the command does not offer.
func checkOutput(got string, allowed ...string) error {
	if got == outputTable || slices.Contains(allowed, got) {
		return nil
	}
	return fmt.Errorf("-o %q: want one of %s (or nothing, for a table)", got, strings.Join(allowed, ", "))
}

// newTable returns a writer that aligns tab-separated columns as kubectl does;
// Flush it when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
}

// writeRow writes one tab-separated row, an empty cell as "<none>".
func writeRow(w io.Writer, cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "<none>"
		}
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// printJSONLine writes v as one line of JSON, for pipes (jq, grep).
func printJSONLine(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// printYAML writes v as YAML (through its JSON form, so the field names are
// the wire names).
func printYAML(w io.Writer, v any) error {
	data, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// humanAge is a duration the way kubectl prints ages: 45s, 5m30s, 3h, 2d4h.
func humanAge(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case s < 10*60:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 3*3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 8*3600:
		if m := (s / 60) % 60; m != 0 {
			return fmt.Sprintf("%dh%dm", s/3600, m)
		}
		return fmt.Sprintf("%dh", s/3600)
	case s < 48*3600:
		return fmt.Sprintf("%dh", s/3600)
	case s < 8*86400:
		if h := (s / 3600) % 24; h != 0 {
			return fmt.Sprintf("%dd%dh", s/86400, h)
		}
		return fmt.Sprintf("%dd", s/86400)
	case s < 2*365*86400:
		return fmt.Sprintf("%dd", s/86400)
	default:
		return fmt.Sprintf("%dy", s/(365*86400))
	}
}

// ageSince is humanAge of the time since t, or "<unknown>" for a zero time.
func ageSince(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return humanAge(now.Sub(t))
}

// formatTime is t in RFC 3339 in the local zone, or "" for a zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format(time.RFC3339)
}

// streamTable prints rows as they come, padding each column to the widest
// cell seen so far. text/tabwriter aligns only what it buffers, which a
// --follow cannot wait for.
type streamTable struct {
	w      io.Writer
	widths []int
}

// row prints cells padded to the column widths (the last column unpadded).
func (t *streamTable) row(cells ...string) {
	var b strings.Builder
	for i, c := range cells {
		if c == "" {
			c = "<none>"
		}
		if i == len(cells)-1 {
			b.WriteString(c)
			break
		}
		if i >= len(t.widths) {
			t.widths = append(t.widths, 0)
		}
		n := utf8.RuneCountInString(c)
		t.widths[i] = max(t.widths[i], n)
		b.WriteString(c)
		b.WriteString(strings.Repeat(" ", t.widths[i]-n+3))
	}
	fmt.Fprintln(t.w, strings.TrimRight(b.String(), " "))
}

// fit widens the columns to hold cells without printing them, so that a table
// printed row by row lines up from its header on.
func (t *streamTable) fit(cells ...string) {
	for i, c := range cells {
		if i >= len(t.widths) {
			t.widths = append(t.widths, 0)
		}
		t.widths[i] = max(t.widths[i], utf8.RuneCountInString(c))
	}
}

// completeOutput offers the -o values of a command to shell completion.
func completeOutput(cmd *cobra.Command, values ...string) {
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}
