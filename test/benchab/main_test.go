package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func write(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runs is go test -bench output of the pod-start benchmark, one line a run.
func runs(p99s ...string) string {
	var b strings.Builder
	b.WriteString("goos: linux\ngoarch: amd64\npkg: github.com/jetlet/jetlet/test/e2e\n")
	for _, p99 := range p99s {
		b.WriteString("BenchmarkPodStart/shim=light-2 \t 100\t 0 ns/op\t 12.5 p50-ms\t " + p99 + " p99-ms\t 9000 intents/s\n")
	}
	b.WriteString("PASS\n")
	return b.String()
}

const gates = `# the pod start's tail and the flood's throughput
BenchmarkPodStart/shim=light p99-ms lower 25%
BenchmarkPodStart/shim=light intents/s higher 25%
`

func TestWithinTheMarginPasses(t *testing.T) {
	var out strings.Builder
	// B's median p99 is 24% above A's (the outlier 900 is not the median).
	ok, err := run(write(t, "gates", gates), write(t, "a", runs("100", "40", "110")), write(t, "b", runs("124", "900", "120")), false, &out)
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v:\n%s", ok, err, out.String())
	}
	if !strings.Contains(out.String(), "BenchmarkPodStart/shim=light") || !strings.Contains(out.String(), "+24.0%") {
		t.Errorf("the table lacks both columns' change:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "BenchmarkPodStart/shim=light p99-ms, each run: A 100 40 110; B 124 900 120") {
		t.Errorf("a gated measure's runs are not listed:\n%s", out.String())
	}
}

func TestBeyondTheMarginFails(t *testing.T) {
	var out strings.Builder
	ok, err := run(write(t, "gates", gates), write(t, "a", runs("100", "100", "100")), write(t, "b", runs("130", "126", "140")), false, &out)
	if err != nil {
		t.Fatal(err)
	}
	if ok || !strings.Contains(out.String(), "FAIL: 30% worse, margin 25%") {
		t.Fatalf("a p99 30%% worse passed:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "BenchmarkPodStart/shim=light p99-ms, each run: A 100 100 100; B 130 126 140") {
		t.Errorf("the failed gate's runs are not listed:\n%s", out.String())
	}
}

func TestHigherIsBetterFailsOnALowerB(t *testing.T) {
	var out strings.Builder
	a := strings.ReplaceAll(runs("100"), "9000 intents/s", "10000 intents/s")
	b := strings.ReplaceAll(runs("100"), "9000 intents/s", "7000 intents/s")
	ok, err := run(write(t, "gates", gates), write(t, "a", a), write(t, "b", b), false, &out)
	if err != nil {
		t.Fatal(err)
	}
	if ok || !strings.Contains(out.String(), "FAIL: 30% worse") {
		t.Fatalf("throughput 30%% lower passed:\n%s", out.String())
	}
}

func TestAGatedMeasureMissingFails(t *testing.T) {
	var out strings.Builder
	b := "BenchmarkOther-2 \t 1\t 5 ns/op\n"
	ok, err := run(write(t, "gates", gates), write(t, "a", runs("100")), write(t, "b", b), false, &out)
	if err != nil {
		t.Fatal(err)
	}
	if ok || !strings.Contains(out.String(), "FAIL: missing from B") {
		t.Fatalf("a benchmark B no longer runs passed:\n%s", out.String())
	}
}

func TestBadGates(t *testing.T) {
	for _, line := range []string{
		"BenchmarkX p99-ms lower",
		"BenchmarkX p99-ms faster 25%",
		"BenchmarkX p99-ms lower 25",
		"PodStart p99-ms lower 25%",
	} {
		if _, err := readGates(write(t, "gates", line+"\n")); err == nil {
			t.Errorf("%q: no error", line)
		}
	}
	if _, err := readGates(write(t, "gates", "# nothing\n")); err == nil {
		t.Error("a gates file without gates: no error")
	}
}

func TestPartialLeavesOutWhatDidNotRun(t *testing.T) {
	var out strings.Builder
	g := gates + "BenchmarkThousandPods/pods=1000 delete-s lower 25%\n"
	ok, err := run(write(t, "gates", g), write(t, "a", runs("100")), write(t, "b", runs("100")), true, &out)
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v: a load not run failed a partial run:\n%s", ok, err, out.String())
	}
	if ok, _ := run(write(t, "gates", g), write(t, "a", runs("100")), write(t, "b", runs("100")), false, &out); ok {
		t.Fatalf("a gated benchmark neither build ran passed a whole run:\n%s", out.String())
	}
}
