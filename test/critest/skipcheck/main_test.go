package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// spec builds one spec of a ginkgo JSON report.
func spec(name, state, message string) map[string]any {
	containers, leaf, _ := strings.Cut(name, " | ")
	return map[string]any{
		"ContainerHierarchyTexts": strings.Split(containers, " / "),
		"LeafNodeText":            leaf,
		"LeafNodeType":            "It",
		"State":                   state,
		"Failure":                 map[string]any{"Message": message, "Location": map[string]any{"FileName": "/x/pkg/validate/pod.go", "LineNumber": 7}},
	}
}

func writeReport(t *testing.T, dir, name string, specs ...map[string]any) string {
	t.Helper()
	// A suite-level node, as ginkgo writes one for BeforeSuite: not a spec.
	all := append([]map[string]any{{"LeafNodeType": "SynchronizedBeforeSuite", "State": "passed"}}, specs...)
	b, err := json.Marshal([]map[string]any{{"SuiteDescription": "CRI validation", "SpecReports": all}})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The suite: spec names are "<containers joined by space> <leaf>".
var suite = []struct{ containers, leaf string }{
	{"[k8s.io] Image Manager", "public image should timeout if requested [Conformance]"},
	{"[k8s.io] Streaming / runtime should support streaming interfaces", "runtime should support exec"},
	{"[k8s.io] Streaming / runtime should support streaming interfaces", "runtime should support attach"},
	{"[k8s.io] PodSandbox", "runtime should support running PodSandbox"},
	{"[k8s.io] NRI", "should receive RunPodSandbox"},
}

func fullName(i int) string {
	return strings.ReplaceAll(suite[i].containers, " / ", " ") + " " + suite[i].leaf
}

func TestCheck(t *testing.T) {
	const skips = `# comment

[k8s.io] Image Manager public image should timeout if requested [Conformance] # exact name, with [ ] that are no expression
^\[k8s\.io\] Streaming  # an expression naming two specs
^\[k8s\.io\] NRI  # skips itself without a socket
`
	dry := func(dir string) string {
		var specs []map[string]any
		for _, s := range suite {
			specs = append(specs, spec(s.containers+" | "+s.leaf, "passed", ""))
		}
		return writeReport(t, dir, "specs.json", specs...)
	}
	// states of the five specs in a run that skipped the listed ones.
	good := []map[string]any{
		spec(suite[0].containers+" | "+suite[0].leaf, "skipped", ""),
		spec(suite[1].containers+" | "+suite[1].leaf, "skipped", ""),
		spec(suite[2].containers+" | "+suite[2].leaf, "skipped", ""),
		spec(suite[3].containers+" | "+suite[3].leaf, "passed", ""),
		spec(suite[4].containers+" | "+suite[4].leaf, "skipped", ""),
	}
	with := func(i int, s map[string]any) []map[string]any {
		out := append([]map[string]any(nil), good...)
		out[i] = s
		return out
	}
	tests := []struct {
		name    string
		skips   string
		run     []map[string]any
		all     bool
		wantErr string // "" passes
	}{
		{name: "listed specs skipped, the rest passed", skips: skips, run: good},
		{name: "an unlisted spec failed", skips: skips, run: with(3, spec(suite[3].containers+" | "+suite[3].leaf, "failed", "boom")), wantErr: "does not explain"},
		{name: "an unlisted spec timed out", skips: skips, run: with(3, spec(suite[3].containers+" | "+suite[3].leaf, "timedout", "slow")), wantErr: "does not explain"},
		{name: "an unlisted spec skipped itself", skips: strings.Replace(skips, "^\\[k8s\\.io\\] NRI  # skips itself without a socket\n", "", 1),
			run: with(4, spec(suite[4].containers+" | "+suite[4].leaf, "skipped", "NRI socket not configured")), wantErr: "does not explain"},
		{name: "a listed spec ran anyway", skips: skips, run: with(0, spec(suite[0].containers+" | "+suite[0].leaf, "passed", "")), wantErr: "does not explain"},
		{name: "a listed spec ran anyway and failed", skips: skips, run: with(1, spec(suite[1].containers+" | "+suite[1].leaf, "failed", "unimplemented")), wantErr: "does not explain"},
		{name: "stale entry: names no spec", skips: skips + "[k8s.io] Gone spec # renamed upstream\n", run: good, wantErr: "stale entry"},
		{name: "stale expression", skips: skips + "^NoSuchSuite # never matches\n", run: good, wantErr: "stale entry"},
		{name: "entry without a reason", skips: skips + "[k8s.io] PodSandbox runtime should support running PodSandbox\n", run: good, wantErr: "no reason"},
		{name: "all: a listed spec that passes is stale", skips: skips, all: true, run: []map[string]any{
			spec(suite[0].containers+" | "+suite[0].leaf, "passed", ""),
			spec(suite[1].containers+" | "+suite[1].leaf, "failed", "unimplemented"),
			spec(suite[2].containers+" | "+suite[2].leaf, "failed", "unimplemented"),
			spec(suite[3].containers+" | "+suite[3].leaf, "passed", ""),
			spec(suite[4].containers+" | "+suite[4].leaf, "skipped", "NRI socket not configured"),
		}, wantErr: "does not explain"},
		{name: "all: listed specs fail or skip themselves", skips: skips, all: true, run: []map[string]any{
			spec(suite[0].containers+" | "+suite[0].leaf, "failed", "not empty"),
			spec(suite[1].containers+" | "+suite[1].leaf, "failed", "unimplemented"),
			spec(suite[2].containers+" | "+suite[2].leaf, "failed", "unimplemented"),
			spec(suite[3].containers+" | "+suite[3].leaf, "passed", ""),
			spec(suite[4].containers+" | "+suite[4].leaf, "skipped", "NRI socket not configured"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			skipsPath := filepath.Join(dir, "skips.txt")
			if err := os.WriteFile(skipsPath, []byte(tt.skips), 0o644); err != nil {
				t.Fatal(err)
			}
			report := writeReport(t, dir, "report.json", tt.run...)
			var out strings.Builder
			err := run("check", skipsPath, dry(dir), report, tt.all, &out)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want a pass, got %v:\n%s", err, out.String())
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("want an error with %q, got %v:\n%s", tt.wantErr, err, out.String())
			}
		})
	}
}

// TestSkipExpr: the -ginkgo.skip expression matches exactly the listed
// specs, as ginkgo matches it ("<suite description> <full name>").
func TestSkipExpr(t *testing.T) {
	var specs []specReport
	for _, s := range suite {
		specs = append(specs, specReport{ContainerHierarchyTexts: strings.Split(s.containers, " / "), LeafNodeText: s.leaf, LeafNodeType: "It"})
	}
	entries, err := parseSkips(strings.NewReader("[k8s.io] Image Manager public image should timeout if requested [Conformance] # exact\n^\\[k8s\\.io\\] Streaming  # two\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlan(entries, suiteReport{SuiteDescription: "CRI validation", SpecReports: specs})
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(p.skipExpr())
	for i := range suite {
		want := i <= 2
		if got := re.MatchString("CRI validation " + fullName(i)); got != want {
			t.Errorf("%q: skipped %v, want %v", fullName(i), got, want)
		}
	}
	// A name that only starts like a listed one is not skipped.
	if re.MatchString("CRI validation " + fullName(0) + " again") {
		t.Error("a longer name was skipped")
	}
}

// TestRepositorySkipFile: the stage's own skip file parses, every entry has
// a reason, and the pending entries are grouped at its end.
func TestRepositorySkipFile(t *testing.T) {
	f, err := os.Open("../skips.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, err := parseSkips(f)
	if err != nil {
		t.Fatal(err)
	}
	pending := false
	for _, e := range entries {
		isPending := strings.HasPrefix(e.Reason, "pending: ")
		if pending && !isPending {
			t.Errorf("%s (%q) follows a pending entry: keep the pending ones at the end", e, e.Reason)
		}
		pending = pending || isPending
	}
}
