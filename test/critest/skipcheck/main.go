// Command skipcheck holds the critest stage's skip-file logic
// (test/critest/run.sh):
//
//	skipcheck plan -skips FILE -specs DRYRUN.json
//	    prints the -ginkgo.skip expression that skips exactly the specs the
//	    skip file names; fails on a malformed file or a stale entry (one that
//	    names no spec of this critest).
//	skipcheck check -skips FILE -specs DRYRUN.json -report RUN.json [-all]
//	    prints the pass/fail/skip counts and every spec that did not pass;
//	    fails when a spec the file does not list failed or skipped itself,
//	    when a listed spec ran although it was to be skipped, or (with -all,
//	    a run that skipped nothing) when a listed spec passed: its line is
//	    stale and should go.
//
// DRYRUN.json and RUN.json are ginkgo JSON reports (-ginkgo.json-report) of
// critest, the first from -ginkgo.dry-run.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/jetlet/jetlet/test/skipfile"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: skipcheck plan|check -skips FILE -specs DRYRUN.json [-report RUN.json] [-all]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	skipsPath := fs.String("skips", "", "the skip file")
	specsPath := fs.String("specs", "", "ginkgo JSON report of a dry run: every spec of the suite")
	reportPath := fs.String("report", "", "ginkgo JSON report of the run (check)")
	all := fs.Bool("all", false, "the run skipped nothing (check): a listed spec that passed is a stale entry")
	_ = fs.Parse(os.Args[2:])
	err := run(os.Args[1], *skipsPath, *specsPath, *reportPath, *all, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "skipcheck:", err)
		os.Exit(1)
	}
}

func run(cmd, skipsPath, specsPath, reportPath string, all bool, out io.Writer) error {
	entries, err := readSkips(skipsPath)
	if err != nil {
		return err
	}
	suite, err := readReport(specsPath)
	if err != nil {
		return err
	}
	p, err := newPlan(entries, suite)
	if err != nil {
		return err
	}
	switch cmd {
	case "plan":
		_, err := fmt.Fprintln(out, p.skipExpr())
		return err
	case "check":
		got, err := readReport(reportPath)
		if err != nil {
			return err
		}
		return p.check(got, all, out)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

// entry is one line of the skip file (test/skipfile): a spec's full name,
// or else a regular expression matched against full names, and why it is
// skipped.
type entry struct {
	skipfile.Entry
	re *regexp.Regexp
}

// parseSkips reads "PATTERN # REASON" lines (test/skipfile) and compiles
// each pattern that is a valid expression.
func parseSkips(r io.Reader) ([]entry, error) {
	lines, err := skipfile.Parse(r)
	return compile(lines), err
}

func readSkips(path string) ([]entry, error) {
	lines, err := skipfile.Read(path)
	return compile(lines), err
}

func compile(lines []skipfile.Entry) []entry {
	entries := make([]entry, 0, len(lines))
	for _, l := range lines {
		re, err := regexp.Compile(l.Pattern)
		if err != nil {
			re = nil // an exact name that is no valid expression
		}
		entries = append(entries, entry{Entry: l, re: re})
	}
	return entries
}

// suiteReport is what skipcheck reads of a ginkgo JSON report.
type suiteReport struct {
	SuiteDescription string
	SpecReports      []specReport
}

type specReport struct {
	ContainerHierarchyTexts []string
	LeafNodeText            string
	LeafNodeType            string
	State                   string
	Failure                 struct {
		Message  string
		Location struct {
			FileName   string
			LineNumber int
		}
	}
}

// name is the spec's full text, as -ginkgo.skip sees it after the suite's
// description.
func (s specReport) name() string {
	var texts []string
	for _, t := range append(append([]string(nil), s.ContainerHierarchyTexts...), s.LeafNodeText) {
		if t != "" {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, " ")
}

func parseReport(r io.Reader) (suiteReport, error) {
	var reports []suiteReport
	if err := json.NewDecoder(r).Decode(&reports); err != nil {
		return suiteReport{}, err
	}
	if len(reports) != 1 {
		return suiteReport{}, fmt.Errorf("%d suites in the report, want 1", len(reports))
	}
	suite := reports[0]
	specs := suite.SpecReports[:0]
	for _, s := range suite.SpecReports {
		if s.LeafNodeType == "It" {
			specs = append(specs, s)
		}
	}
	suite.SpecReports = specs
	return suite, nil
}

func readReport(path string) (suiteReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return suiteReport{}, err
	}
	defer f.Close()
	suite, err := parseReport(f)
	if err != nil {
		return suiteReport{}, fmt.Errorf("%s: %w", path, err)
	}
	return suite, nil
}

// plan is which spec each entry names.
type plan struct {
	suite  string
	listed map[string]entry // spec name → the first entry naming it
}

// newPlan resolves each entry to specs: the spec of that exact name, else
// every spec its expression matches. An entry that names none is stale.
func newPlan(entries []entry, suite suiteReport) (plan, error) {
	p := plan{suite: suite.SuiteDescription, listed: map[string]entry{}}
	var errs []error
	for _, e := range entries {
		var names []string
		for _, s := range suite.SpecReports {
			if s.name() == e.Pattern {
				names = []string{e.Pattern}
				break
			}
			if e.re != nil && e.re.MatchString(s.name()) {
				names = append(names, s.name())
			}
		}
		if len(names) == 0 {
			errs = append(errs, fmt.Errorf("stale entry %s: it names no spec of this critest; remove or fix it", e))
		}
		for _, n := range names {
			if _, ok := p.listed[n]; !ok {
				p.listed[n] = e
			}
		}
	}
	return p, errors.Join(errs...)
}

// skipExpr matches exactly the listed specs as -ginkgo.skip sees them
// ("<suite description> <spec name>").
func (p plan) skipExpr() string {
	if len(p.listed) == 0 {
		return "^$"
	}
	names := make([]string, 0, len(p.listed))
	for n := range p.listed {
		names = append(names, regexp.QuoteMeta(n))
	}
	sort.Strings(names)
	return "^" + regexp.QuoteMeta(p.suite+" ") + "(?:" + strings.Join(names, "|") + ")$"
}

// check reports the run and fails on what the skip file does not explain.
func (p plan) check(run suiteReport, all bool, out io.Writer) error {
	var passed, failed, listedSkipped, selfSkipped, notRun int
	var problems, notes []string
	for _, s := range run.SpecReports {
		name := s.name()
		e, listed := p.listed[name]
		if listed && !all && s.State != "skipped" {
			problems = append(problems, fmt.Sprintf("ran although listed (%s), the skip expression is wrong: %s", e, name))
		}
		switch {
		case s.State == "passed":
			passed++
			if listed && all {
				problems = append(problems, fmt.Sprintf("PASSES NOW, delete %s from the skip file: %s", e, name))
			}
		case s.State == "skipped" && s.Failure.Message == "" && listed && !all:
			listedSkipped++
		case s.State == "skipped" && s.Failure.Message == "":
			// Skipped without running though the skip file did not ask:
			// critest skips its benchmarks itself (-ginkgo.skip benchmark), and
			// a partial run (-ginkgo.focus) the specs out of focus.
			notRun++
		case s.State == "skipped":
			selfSkipped++
			msg := fmt.Sprintf("skipped itself: %s: %s", name, oneLine(s.Failure.Message))
			if listed {
				notes = append(notes, msg+" (listed: "+e.Reason+")")
			} else {
				problems = append(problems, msg+" (not in the skip file)")
			}
		default: // failed, panicked, timedout, interrupted, aborted
			failed++
			msg := fmt.Sprintf("%s: %s [%s:%d]: %s", s.State, name, baseName(s.Failure.Location.FileName), s.Failure.Location.LineNumber, oneLine(s.Failure.Message))
			if listed {
				notes = append(notes, msg+" (listed: "+e.Reason+")")
			} else {
				problems = append(problems, msg+" (not in the skip file)")
			}
		}
	}
	for _, n := range notes {
		fmt.Fprintln(out, "   "+n)
	}
	for _, pr := range problems {
		fmt.Fprintln(out, "== FAIL: "+pr)
	}
	ran := passed + failed
	fmt.Fprintf(out, "== critest: %d specs: %d ran (%d passed, %d failed), %d skipped themselves, %d skipped by the skip file, %d not run (critest's benchmarks, or out of focus)\n",
		len(run.SpecReports), ran, passed, failed, selfSkipped, listedSkipped, notRun)
	if len(problems) > 0 {
		return fmt.Errorf("%d spec(s) the skip file does not explain", len(problems))
	}
	return nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func baseName(p string) string { return p[strings.LastIndex(p, "/")+1:] }
