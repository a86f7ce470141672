package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The benchmarks that run jetlet measure it from outside; to see where its
// time goes, JETLET_E2E_PROFILE=<dir> runs every node with --profiling and
// lets a benchmark profile a load (profileLoad): a CPU profile over the
// load's first JETLET_E2E_PROFILE_SECONDS (default 5), every goroutine's
// stack halfway through it, and the allocs, mutex and block profiles before
// and after it (read with go tool pprof -base
// <name>-allocs-before.pb.gz <name>-allocs-after.pb.gz). Without it, a load
// still reports what it cost jetlet per intent in counts that do not depend
// on how busy the machine is (loadCost).

// profileDir is where profiles go; empty when none are asked for.
func profileDir() string { return os.Getenv("JETLET_E2E_PROFILE") }

// profileLoad starts profiling n's jetlet for a load named name and returns
// what ends it; nothing is done without JETLET_E2E_PROFILE.
func profileLoad(b *testing.B, n *node, name string) (end func()) {
	b.Helper()
	dir := profileDir()
	if dir == "" {
		return func() {}
	}
	seconds := 5
	if v := os.Getenv("JETLET_E2E_PROFILE_SECONDS"); v != "" {
		var err error
		if seconds, err = strconv.Atoi(v); err != nil || seconds < 1 {
			b.Fatalf("JETLET_E2E_PROFILE_SECONDS=%q: want a whole number of seconds", v)
		}
	}
	base := n.proc.HTTPAddr() + "/debug/pprof/"
	save := func(profile, file string) {
		resp, err := http.Get(base + profile)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s%s: %s", base, profile, resp.Status)
		}
		f, err := os.Create(filepath.Join(dir, file))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if _, err := io.Copy(f, resp.Body); err != nil {
			b.Fatal(err)
		}
	}
	for _, p := range []string{"allocs", "mutex", "block"} {
		save(p, name+"-"+p+"-before.pb.gz")
	}
	cpu := make(chan struct{})
	go func() {
		defer close(cpu)
		save(fmt.Sprintf("profile?seconds=%d", seconds), name+"-cpu.pb.gz")
	}()
	// Where every goroutine waits, halfway through the CPU profile's window:
	// what serialises the load.
	stacks := make(chan struct{})
	time.AfterFunc(time.Duration(seconds)*time.Second/2, func() {
		defer close(stacks)
		save("goroutine?debug=1", name+"-goroutines.txt")
	})
	return func() {
		for _, p := range []string{"allocs", "mutex", "block"} {
			save(p, name+"-"+p+"-after.pb.gz")
		}
		<-cpu
		<-stacks
		b.Logf("profiles of %s in %s", name, dir)
	}
}

// loadCost counts what jetlet's process (its embedded NATS server
// included) spends on a load: CPU time, heap allocations and read/write
// system calls. Per intent, these do not depend on how busy the machine is,
// as a rate or a latency does.
type loadCost struct {
	cpu     time.Duration
	mallocs float64
	rwCalls int64
}

func costOf(b *testing.B, n *node) loadCost {
	b.Helper()
	self, _ := cpuTime(b, n.proc.Pid())
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", n.proc.Pid()))
	if err != nil {
		b.Fatal(err)
	}
	var calls int64
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && (k == "syscr" || k == "syscw") {
			c, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			calls += c
		}
	}
	return loadCost{cpu: self, mallocs: metric(b, n, "go_memstats_mallocs_total"), rwCalls: calls}
}

// report reports what the load since c cost per unit (an intent, a pod),
// count of them.
func (c loadCost) report(b *testing.B, n *node, count int, unit string) {
	b.Helper()
	now := costOf(b, n)
	b.ReportMetric(float64((now.cpu-c.cpu).Microseconds())/float64(count), "jetlet-cpu-µs/"+unit)
	b.ReportMetric((now.mallocs-c.mallocs)/float64(count), "jetlet-allocs/"+unit)
	b.ReportMetric(float64(now.rwCalls-c.rwCalls)/float64(count), "jetlet-rw-syscalls/"+unit)
}
