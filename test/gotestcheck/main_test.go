package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetlet/jetlet/test/skipfile"
)

const module = "example.com/m"

// ev is one line of go test -json: action, package (relative), test, output.
func ev(action, pkg, test, output string) string {
	e := map[string]string{"Action": action, "Package": module + "/" + pkg}
	if test != "" {
		e["Test"] = test
	}
	if output != "" {
		e["Output"] = output
	}
	b, _ := json.Marshal(e)
	return string(b) + "\n"
}

// passing is a package whose test passes.
func passing(pkg, test string) string {
	return ev("start", pkg, "", "") + ev("run", pkg, test, "") + ev("output", pkg, test, "=== RUN   "+test+"\n") +
		ev("output", pkg, test, "--- PASS: "+test+" (0.00s)\n") + ev("pass", pkg, test, "") +
		ev("output", pkg, "", "PASS\n") + ev("output", pkg, "", "ok  \t"+module+"/"+pkg+"\t0.1s\n") + ev("pass", pkg, "", "")
}

// skipping is a test that skips with msg.
func skipping(pkg, test, msg string) string {
	return ev("run", pkg, test, "") + ev("output", pkg, test, "=== RUN   "+test+"\n") + ev("output", pkg, test, "    x_test.go:9: "+msg+"\n") +
		ev("output", pkg, test, "--- SKIP: "+test+" (0.00s)\n") + ev("skip", pkg, test, "")
}

func TestCheck(t *testing.T) {
	const allow = `# comment
runtime/proc TestIsolation  # cgroup v2 only
test/cri TestConformance/external  # needs an endpoint, with its subtests
`
	good := passing("a", "TestA") +
		ev("start", "runtime/proc", "", "") + skipping("runtime/proc", "TestIsolation", "isolation not full") + ev("output", "runtime/proc", "", "ok  \t"+module+"/runtime/proc\t1s\n") + ev("pass", "runtime/proc", "", "") +
		ev("start", "test/cri", "", "") + skipping("test/cri", "TestConformance/external/RestartAdoption", "JETLET_CRI_ENDPOINT not set") + ev("pass", "test/cri", "", "") +
		ev("skip", "test/fakecri", "", "") // no test files
	failing := ev("start", "b", "", "") + ev("run", "b", "TestB", "") + ev("output", "b", "TestB", "=== RUN   TestB\n") +
		ev("output", "b", "TestB", "    b_test.go:3: want 2, got 3\n") + ev("output", "b", "TestB", "--- FAIL: TestB (0.00s)\n") + ev("fail", "b", "TestB", "") +
		ev("output", "b", "", "FAIL\n") + ev("output", "b", "", "FAIL\t"+module+"/b\t0.1s\n") + ev("fail", "b", "", "")
	buildFailed := `{"ImportPath":"example.com/m/runtime/proc [example.com/m/runtime/proc.test]","Action":"build-output","Output":"runtime/proc/x.go:1:1: undefined: y\n"}` + "\n" +
		`{"ImportPath":"example.com/m/runtime/proc [example.com/m/runtime/proc.test]","Action":"build-fail"}` + "\n" +
		ev("start", "runtime/proc", "", "") + ev("output", "runtime/proc", "", "FAIL\t"+module+"/runtime/proc [build failed]\n") +
		`{"Action":"fail","Package":"example.com/m/runtime/proc","FailedBuild":"example.com/m/runtime/proc [example.com/m/runtime/proc.test]"}` + "\n"
	panicked := ev("start", "c", "", "") + ev("run", "c", "TestC", "") + ev("output", "c", "TestC", "=== RUN   TestC\n") +
		ev("output", "c", "", "panic: test timed out after 10m0s\n") + ev("output", "c", "", "FAIL\t"+module+"/c\t600s\n") + ev("fail", "c", "", "")
	tests := []struct {
		name    string
		allow   string
		in      string
		wantErr string   // "" passes
		wantOut []string // printed
		notOut  []string // not printed
	}{
		{name: "passes, listed skips, a subtest under a listed prefix", allow: allow, in: good,
			wantOut: []string{"ok  \t" + module + "/a\t0.1s", "skipped, allowed (cgroup v2 only): runtime/proc TestIsolation: x_test.go:9: isolation not full", "0 failed, 2 skipped"},
			notOut:  []string{"=== RUN", "--- PASS"}},
		{name: "an unlisted skip", allow: allow, in: good + ev("start", "d", "", "") + skipping("d", "TestD", "no nsenter") + ev("pass", "d", "", ""),
			wantErr: "1 skip problems", wantOut: []string{"== FAIL: d TestD skipped and ", "does not list it: x_test.go:9: no nsenter"}},
		{name: "a test named like a listed one is not admitted", allow: allow, in: good + skipping("runtime/proc", "TestIsolationFull", "no cgroups here"),
			wantErr: "1 skip problems", wantOut: []string{"runtime/proc TestIsolationFull skipped"}},
		{name: "a listed test skipped in another package is not admitted", allow: allow, in: good + skipping("runtime/proc/shim", "TestIsolation", "no cgroups here"),
			wantErr: "1 skip problems", wantOut: []string{"runtime/proc/shim TestIsolation skipped"}},
		{name: "a stale entry", allow: allow + "runtime/proc TestGone  # skipped no more\n", in: good,
			wantErr: "1 skip problems", wantOut: []string{`stale entry line 4 "runtime/proc TestGone"`}},
		{name: "a failed test: its output and the package's line", allow: allow, in: good + failing,
			wantErr: "1 tests and 1 packages failed", wantOut: []string{"    b_test.go:3: want 2, got 3\n--- FAIL: TestB (0.00s)\n", "FAIL\t" + module + "/b\t0.1s", "== FAIL: b TestB\n", "== FAIL: package b\n"},
			notOut: []string{"=== RUN   TestB"}},
		{name: "a failed build: its errors; the package's entries are not stale", allow: allow, in: passing("a", "TestA") + buildFailed + skipping("test/cri", "TestConformance/external", "no endpoint"),
			wantErr: "0 tests and 1 packages failed, 0 skip problems", wantOut: []string{"runtime/proc/x.go:1:1: undefined: y", "== FAIL: package runtime/proc"}},
		{name: "a package that panicked: the test that did not end, the panic", allow: allow, in: good + panicked,
			wantErr: "1 packages failed", wantOut: []string{"--- c TestC did not end:", "panic: test timed out after 10m0s", "== FAIL: package c"}},
		{name: "a line that is not JSON is passed on", allow: allow, in: "go: downloading example.com/x v1\n" + good,
			wantOut: []string{"go: downloading example.com/x v1\n"}},
		{name: "an entry without a test", allow: "runtime/proc  # no test named\n", in: good, wantErr: "want PACKAGE TEST"},
		{name: "an entry without a reason", allow: "runtime/proc TestIsolation\n", in: good, wantErr: "has no reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "skips.allowed")
			if err := os.WriteFile(path, []byte(tt.allow), 0o644); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			err := run(path, module, strings.NewReader(tt.in), &out)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("want a pass, got %v:\n%s", err, out.String())
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("want an error with %q, got %v:\n%s", tt.wantErr, err, out.String())
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, n := range tt.notOut {
				if strings.Contains(out.String(), n) {
					t.Errorf("output has %q:\n%s", n, out.String())
				}
			}
		})
	}
}

func TestModulePathIsGoModsModuleDirective(t *testing.T) {
	if got := modulePath([]byte("// the module\nmodule \"example.com/m\" // comment\n\ngo 1.26\n")); got != module {
		t.Errorf("module %q, want %q", got, module)
	}
}

// CI's allow-list parses, names packages of this module, and gives each
// entry a reason.
func TestRepositoryAllowList(t *testing.T) {
	lines, err := skipfile.Read("../../.ci/skips.allowed")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mod := modulePath(gomod)
	entries, err := parseAllowed(lines, mod)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		dir := filepath.Join("../..", strings.TrimPrefix(e.pkg, mod+"/"))
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("%s: no package %s here: %v", e.Entry, e.pkg, err)
		}
	}
}
