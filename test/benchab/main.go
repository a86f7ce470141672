// Command benchab is the verdict of CI's performance stage (.ci/perf): it
// reads the `go test -bench` output of the same benchmarks run against two
// builds, A (the baseline) and B (the tree under test), each several times
// in one sitting, takes the median of each measure over the runs, prints
// both columns, and fails when B is worse than A by more than a gate allows.
//
// Usage: benchab -gates .ci/perf-gates -a A.txt -b B.txt
//
// Each line of the gates file is "BENCHMARK UNIT DIRECTION MARGIN%":
// BENCHMARK a benchmark's full name without its -GOMAXPROCS suffix
// (BenchmarkPodStart/shim=light), UNIT one of its measures (p99-ms,
// intents/s), DIRECTION "higher" or "lower" (which is better), MARGIN how
// much worse, in percent, B's median may be than A's. A gated measure
// missing from either side fails too: a benchmark that no longer runs or
// no longer reports it is not a pass, unless -partial says only some loads
// ran: then a gate whose benchmark neither build ran is left out. '#'
// starts a comment.
//
// Medians of a few runs of each build, taken alternately on one machine,
// make a slow or busy machine slow both columns alike; the margin absorbs
// what noise is left.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"golang.org/x/perf/benchfmt"
)

func main() {
	gates := flag.String("gates", "", "the gates file (BENCHMARK UNIT higher|lower MARGIN%)")
	a := flag.String("a", "", "the baseline's go test -bench output")
	b := flag.String("b", "", "the tree under test's go test -bench output")
	partial := flag.Bool("partial", false, "only some loads ran: leave out the gates of benchmarks neither build ran")
	flag.Parse()
	if *gates == "" || *a == "" || *b == "" {
		fmt.Fprintln(os.Stderr, "usage: benchab -gates FILE -a A.txt -b B.txt")
		os.Exit(2)
	}
	ok, err := run(*gates, *a, *b, *partial, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchab:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// key names one measure of one benchmark.
type key struct{ bench, unit string }

// gate is one line of the gates file.
type gate struct {
	key
	higherIsBetter bool
	margin         float64 // percent
}

func run(gatesPath, aPath, bPath string, partial bool, out io.Writer) (bool, error) {
	gates, err := readGates(gatesPath)
	if err != nil {
		return false, err
	}
	a, err := readSamples(aPath)
	if err != nil {
		return false, err
	}
	b, err := readSamples(bPath)
	if err != nil {
		return false, err
	}
	ran := map[string]bool{}
	for k := range a {
		ran[k.bench] = true
	}
	for k := range b {
		ran[k.bench] = true
	}
	if partial {
		gates = slices.DeleteFunc(gates, func(g gate) bool { return !ran[g.bench] })
	}
	gated := map[key]gate{}
	for _, g := range gates {
		gated[g.key] = g
	}
	keys := make([]key, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(x, y key) int {
		if c := strings.Compare(x.bench, y.bench); c != 0 {
			return c
		}
		return strings.Compare(x.unit, y.unit)
	})
	var failed, judged []key
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "benchmark\tmeasure\tA median\tB median\tB vs A\truns A/B\tgate\t")
	for _, k := range keys {
		verdict := ""
		ma, mb := median(a[k]), median(b[k])
		change := "-"
		if len(a[k]) > 0 && len(b[k]) > 0 && ma != 0 {
			change = fmt.Sprintf("%+.1f%%", 100*(mb-ma)/ma)
		}
		if g, isGated := gated[k]; isGated {
			verdict = g.judge(a[k], b[k])
			judged = append(judged, k)
			if !strings.HasPrefix(verdict, "ok") {
				failed = append(failed, k)
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t\n", k.bench, k.unit, format(a[k], ma), format(b[k], mb), change, len(a[k]), len(b[k]), verdict)
	}
	ok := len(failed) == 0
	for _, g := range gates {
		if _, seen := a[g.key]; !seen {
			if _, seen := b[g.key]; !seen {
				ok = false
				fmt.Fprintf(w, "%s\t%s\t-\t-\t-\t0/0\tFAIL: reported by neither build\t\n", g.bench, g.unit)
			}
		}
	}
	if err := w.Flush(); err != nil {
		return false, err
	}
	// Each gated measure's every run, in the order run: the spread a
	// median hides, for whoever reads a failure or sets a margin.
	for _, k := range judged {
		fmt.Fprintf(out, "benchab: %s %s, each run: A %s; B %s\n", k.bench, k.unit, list(a[k]), list(b[k]))
	}
	if ok {
		fmt.Fprintln(out, "benchab: every gated measure of B is within its margin of A")
	} else {
		fmt.Fprintln(out, "benchab: FAIL: B is worse than A beyond a gate's margin, or a gated measure is missing")
	}
	return ok, nil
}

// judge is the gate's verdict on B's samples against A's.
func (g gate) judge(a, b []float64) string {
	if len(a) == 0 || len(b) == 0 {
		return "FAIL: missing from " + map[bool]string{true: "A", false: "B"}[len(a) == 0]
	}
	ma, mb := median(a), median(b)
	worse := 100 * (mb - ma) / ma // percent; positive is a higher B
	if g.higherIsBetter {
		worse = -worse
	}
	if ma == 0 {
		// Nothing to take a percentage of: B may not be worse at all.
		worse = 0
		if (g.higherIsBetter && mb < 0) || (!g.higherIsBetter && mb > 0) {
			worse = 100 + g.margin
		}
	}
	if worse > g.margin {
		return fmt.Sprintf("FAIL: %.0f%% worse, margin %.0f%%", worse, g.margin)
	}
	return fmt.Sprintf("ok (margin %.0f%%)", g.margin)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func format(xs []float64, m float64) string {
	if len(xs) == 0 {
		return "-"
	}
	return strconv.FormatFloat(m, 'g', 4, 64)
}

func list(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'g', 4, 64)
	}
	return strings.Join(s, " ")
}

// readSamples reads every result of a go test -bench output: each
// benchmark's measures, one sample a run.
func readSamples(path string) (map[key][]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	samples := map[key][]float64{}
	r := benchfmt.NewReader(f, path)
	for r.Scan() {
		res, ok := r.Result().(*benchfmt.Result)
		if !ok {
			continue // a syntax error in a line that is not a result's: ignore it
		}
		name := string(res.Name.Full())
		// The -GOMAXPROCS suffix is the machine's, not the benchmark's.
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		name = "Benchmark" + name
		for _, v := range res.Values {
			k := key{name, v.Unit}
			samples[k] = append(samples[k], v.Value)
		}
	}
	if err := r.Err(); err != nil {
		return nil, err
	}
	return samples, nil
}

func readGates(path string) ([]gate, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var gates []gate
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		g, err := parseGate(fields)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		gates = append(gates, g)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(gates) == 0 {
		return nil, fmt.Errorf("%s: no gates", path)
	}
	return gates, nil
}

func parseGate(fields []string) (gate, error) {
	if len(fields) != 4 {
		return gate{}, errors.New(`want "BENCHMARK UNIT higher|lower MARGIN%"`)
	}
	g := gate{key: key{fields[0], fields[1]}}
	if !strings.HasPrefix(g.bench, "Benchmark") {
		return gate{}, fmt.Errorf("%q: a benchmark's name starts with Benchmark", g.bench)
	}
	switch fields[2] {
	case "higher":
		g.higherIsBetter = true
	case "lower":
	default:
		return gate{}, fmt.Errorf("%q: want higher or lower (which is better)", fields[2])
	}
	margin, err := strconv.ParseFloat(strings.TrimSuffix(fields[3], "%"), 64)
	if err != nil || margin < 0 || !strings.HasSuffix(fields[3], "%") {
		return gate{}, fmt.Errorf("%q: want a margin in percent, like 25%%", fields[3])
	}
	g.margin = margin
	return g, nil
}
