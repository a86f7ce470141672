// Command gotestcheck is the verdict of CI's main test stage (.ci/run): it
// reads `go test -json` on its standard input and
//
//   - prints what `go test` prints without -json: each package's ok or FAIL
//     line, and the whole output of every test that failed, of every package
//     that failed outside a test and of every build that failed;
//   - prints every skipped test with its message and the allow-list entry
//     that lets it skip;
//   - fails when a test or package failed, when a test skipped that the
//     allow-list does not name, or when an entry of the allow-list names no
//     test that skipped (a stale entry: the skip is gone, so is the line),
//     and ends with the list of what failed.
//
// Usage: go test -race -json ./... | gotestcheck -skips .ci/skips.allowed
//
// The allow-list is a skip file (test/skipfile) whose entries are "PACKAGE
// TEST # REASON": PACKAGE relative to the module (runtime/embedded) or in full,
// TEST a test's name, which also admits its subtests (TestConformance/external
// admits TestConformance/external/RestartAdoption).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/jetlet/jetlet/test/skipfile"
)

func main() {
	skips := flag.String("skips", "", "the allow-list of skipped tests (PACKAGE TEST # REASON)")
	module := flag.String("module", "", "the module path the allow-list's packages are relative to (default: go.mod's, in the current directory)")
	flag.Parse()
	if err := run(*skips, *module, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gotestcheck:", err)
		os.Exit(1)
	}
}

func run(skipsPath, module string, in io.Reader, out io.Writer) error {
	if skipsPath == "" {
		return errors.New("-skips FILE is required")
	}
	if module == "" {
		b, err := os.ReadFile("go.mod")
		if err != nil {
			return fmt.Errorf("the module path (-module, else go.mod): %w", err)
		}
		module = modulePath(b)
	}
	lines, err := skipfile.Read(skipsPath)
	if err != nil {
		return err
	}
	allowed, err := parseAllowed(lines, module)
	if err != nil {
		return fmt.Errorf("%s: %w", skipsPath, err)
	}
	c := newChecker(allowed, module, skipsPath, out)
	if err := c.read(in); err != nil {
		return err
	}
	return c.verdict()
}

// modulePath is the path go.mod's module directive names.
func modulePath(gomod []byte) string {
	for l := range strings.Lines(string(gomod)) {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// allowed is one entry of the allow-list.
type allowed struct {
	skipfile.Entry
	pkg, test string
	used      bool
}

func parseAllowed(lines []skipfile.Entry, module string) ([]*allowed, error) {
	var out []*allowed
	var errs []error
	for _, l := range lines {
		f := strings.Fields(l.Pattern)
		if len(f) != 2 {
			errs = append(errs, fmt.Errorf("%s: want PACKAGE TEST # REASON", l))
			continue
		}
		pkg := f[0]
		if pkg != module && !strings.HasPrefix(pkg, module+"/") {
			pkg = module + "/" + strings.TrimPrefix(pkg, "./")
		}
		out = append(out, &allowed{Entry: l, pkg: pkg, test: f[1]})
	}
	return out, errors.Join(errs...)
}

func (a *allowed) admits(pkg, test string) bool {
	return pkg == a.pkg && (test == a.test || strings.HasPrefix(test, a.test+"/"))
}

// event is a line of `go test -json` (cmd/test2json, and go test's build
// events).
type event struct {
	Action      string
	Package     string
	Test        string
	Output      string
	ImportPath  string // build-output, build-fail
	FailedBuild string
}

type key struct{ pkg, test string }

type checker struct {
	allowed   []*allowed
	module    string
	skipsPath string
	out       io.Writer

	testOut  map[key][]string    // output of each test still running
	pkgOut   map[string][]string // output of each package outside its tests
	buildOut map[string][]string // output of each build, by import path

	passed, skipped int
	failed          []string        // "pkg Test" of each failed test
	failedPkgs      map[string]bool // packages whose build or run failed
	problems        []string        // skips the allow-list does not explain, stale entries
}

func newChecker(allowed []*allowed, module, skipsPath string, out io.Writer) *checker {
	return &checker{allowed: allowed, module: module, skipsPath: skipsPath, out: out,
		testOut: map[key][]string{}, pkgOut: map[string][]string{}, buildOut: map[string][]string{}, failedPkgs: map[string]bool{}}
}

func (c *checker) read(in io.Reader) error {
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			var ev event
			if json.Unmarshal([]byte(line), &ev) != nil || ev.Action == "" {
				fmt.Fprint(c.out, line) // not go test's JSON: pass it on
			} else {
				c.handle(ev)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (c *checker) handle(ev event) {
	k := key{ev.Package, ev.Test}
	switch {
	case ev.Action == "build-output":
		c.buildOut[ev.ImportPath] = append(c.buildOut[ev.ImportPath], ev.Output)
	case ev.Action == "build-fail":
		c.printLines(c.buildOut[ev.ImportPath])
		delete(c.buildOut, ev.ImportPath)
	case ev.Test == "" && ev.Action == "output":
		c.pkgOut[ev.Package] = append(c.pkgOut[ev.Package], ev.Output)
		if isSummary(ev.Output) {
			fmt.Fprint(c.out, ev.Output)
		}
	case ev.Test == "" && ev.Action == "fail":
		c.failedPkgs[ev.Package] = true
		// Tests that never ended (a timeout, a crash), then what the
		// package printed outside its tests (the panic, TestMain's output).
		for tk, lines := range c.testOut {
			if tk.pkg == ev.Package {
				fmt.Fprintf(c.out, "--- %s %s did not end:\n", c.short(tk.pkg), tk.test)
				c.printLines(lines)
				delete(c.testOut, tk)
			}
		}
		var rest []string
		for _, l := range c.pkgOut[ev.Package] {
			if !isSummary(l) && l != "FAIL\n" {
				rest = append(rest, l)
			}
		}
		if len(rest) > 0 {
			fmt.Fprintf(c.out, "--- %s, outside its tests:\n", c.short(ev.Package))
			c.printLines(rest)
		}
		delete(c.pkgOut, ev.Package)
	case ev.Test == "" && (ev.Action == "pass" || ev.Action == "skip"):
		delete(c.pkgOut, ev.Package)
	case ev.Test == "":
	case ev.Action == "output":
		c.testOut[k] = append(c.testOut[k], ev.Output)
	case ev.Action == "pass":
		c.passed++
		delete(c.testOut, k)
	case ev.Action == "fail":
		c.printLines(c.testOut[k])
		c.failed = append(c.failed, c.short(ev.Package)+" "+ev.Test)
		delete(c.testOut, k)
	case ev.Action == "skip":
		c.skipped++
		c.skip(ev.Package, ev.Test, skipMessage(c.testOut[k]))
		delete(c.testOut, k)
	}
}

func (c *checker) skip(pkg, test, msg string) {
	for _, a := range c.allowed {
		if a.admits(pkg, test) {
			a.used = true
			fmt.Fprintf(c.out, "   skipped, allowed (%s): %s %s: %s\n", a.Reason, c.short(pkg), test, msg)
			return
		}
	}
	p := fmt.Sprintf("%s %s skipped and %s does not list it: %s", c.short(pkg), test, c.skipsPath, msg)
	fmt.Fprintln(c.out, "== FAIL: "+p)
	c.problems = append(c.problems, p)
}

// verdict reports the stale entries and the run's failures.
func (c *checker) verdict() error {
	for _, a := range c.allowed {
		if !a.used && !c.failedPkgs[a.pkg] {
			p := fmt.Sprintf("stale entry %s of %s: %s %s did not skip; delete the line", a.Entry, c.skipsPath, c.short(a.pkg), a.test)
			fmt.Fprintln(c.out, "== FAIL: "+p)
			c.problems = append(c.problems, p)
		}
	}
	var pkgs []string
	for p := range c.failedPkgs {
		pkgs = append(pkgs, c.short(p))
	}
	slices.Sort(pkgs)
	fmt.Fprintf(c.out, "== go test: %d tests passed, %d failed, %d skipped; %d packages failed\n", c.passed, len(c.failed), c.skipped, len(pkgs))
	for _, f := range c.failed {
		fmt.Fprintln(c.out, "== FAIL: "+f)
	}
	for _, p := range pkgs {
		fmt.Fprintln(c.out, "== FAIL: package "+p)
	}
	if len(c.failed)+len(pkgs)+len(c.problems) > 0 {
		return fmt.Errorf("%d tests and %d packages failed, %d skip problems", len(c.failed), len(pkgs), len(c.problems))
	}
	return nil
}

// short is a package's path relative to the module, as the allow-list
// names it.
func (c *checker) short(pkg string) string {
	if rel, ok := strings.CutPrefix(pkg, c.module+"/"); ok {
		return rel
	}
	return pkg
}

func (c *checker) printLines(lines []string) {
	for _, l := range lines {
		if !isMarker(l) {
			fmt.Fprint(c.out, l)
		}
	}
}

// isSummary: go test's line for a whole package ("ok  \t...", "FAIL\t...",
// "?   \t...").
func isSummary(l string) bool {
	return strings.HasPrefix(l, "ok  \t") || strings.HasPrefix(l, "FAIL\t") || strings.HasPrefix(l, "?   \t")
}

// isMarker: the lines -v adds that go test without it does not print.
func isMarker(l string) bool {
	for _, p := range []string{"=== RUN ", "=== PAUSE ", "=== CONT ", "=== NAME "} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// skipMessage is what a skipped test said, on one line.
func skipMessage(lines []string) string {
	var parts []string
	for _, l := range lines {
		if isMarker(l) || strings.HasPrefix(strings.TrimSpace(l), "--- SKIP: ") {
			continue
		}
		if s := strings.TrimSpace(l); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " / ")
}
