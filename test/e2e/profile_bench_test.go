package e2e_test

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/procstat"
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
	self, _ := procstat.CPU(b, n.proc.Pid())
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

// probeRun reports whether this call of a benchmark is testing's first,
// with b.N = 1, whose result is thrown away when -benchtime asks for a
// count above one (golang.org/issue/32051): a load whose set-up is costly
// (200 converged pods, a node started) returns at once then, and the stage
// that runs it (.ci/perf) pays for that set-up once a run, not twice.
func probeRun(b *testing.B) bool {
	if b.N != 1 {
		return false
	}
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return false
	}
	v := f.Value.String()
	return strings.HasSuffix(v, "x") && v != "1x"
}

// startCPU is what a load of pod starts costs the processes that run it,
// each its own: jetlet, the NATS server (a nats-server process of the
// benchmark's, so that its CPU is not jetlet's) and the pod shims.
type startCPU struct {
	n            *node
	srv          *natsServerProc
	jetlet, nats time.Duration
}

func startCPUOf(b *testing.B, n *node, srv *natsServerProc) startCPU {
	b.Helper()
	jetlet, _ := procstat.CPU(b, n.proc.Pid())
	nats, _ := procstat.CPU(b, srv.cmd.Process.Pid)
	return startCPU{n: n, srv: srv, jetlet: jetlet, nats: nats}
}

// report reports the CPU seconds per 1,000 pod starts of jetlet and the
// NATS server since c, and of the pod shims running now with what they
// started (the load started them): their threads' (runTime), their
// children's (each container's process: its init, a Go program, until it
// executes the command, a sleep here; its threads that ended before the
// exec are not counted) and their reaped children's; pods the starts.
func (c startCPU) report(b *testing.B, pods int) {
	b.Helper()
	jetlet, _ := procstat.CPU(b, c.n.proc.Pid())
	nats, _ := procstat.CPU(b, c.srv.cmd.Process.Pid)
	var shims time.Duration
	for pid := range podShims(b, c.n.dataDir).procs {
		_, reaped := procstat.CPU(b, pid)
		shims += reaped + runTime(b, pid)
		kids, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
		if err != nil {
			b.Fatal(err)
		}
		for _, kid := range strings.Fields(string(kids)) {
			k, err := strconv.Atoi(kid)
			if err != nil {
				b.Fatal(err)
			}
			shims += runTime(b, k)
		}
	}
	per1000 := func(d time.Duration) float64 { return d.Seconds() * 1000 / float64(pods) }
	b.ReportMetric(per1000(jetlet-c.jetlet), "jetlet-cpu-s/1000pods")
	b.ReportMetric(per1000(nats-c.nats), "nats-cpu-s/1000pods")
	b.ReportMetric(per1000(shims), "shim-cpu-s/1000pods")
}

// startNodeWithNATS is startNode on a nats-server process of its own, whose
// CPU is then apart from jetlet's.
func startNodeWithNATS(b *testing.B, extra ...string) (*node, *natsServerProc) {
	b.Helper()
	srv := startNATSServer(b, freeTCPPort(b), b.TempDir())
	return startNode(b, shortDir(b), srv.url(), extra...), srv
}

// runTime is the CPU time of pid's threads, to the nanosecond (schedstat):
// a pod's processes use a few milliseconds each, which the clock ticks of
// /proc/<pid>/stat would round away.
func runTime(b *testing.B, pid int) time.Duration {
	b.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for _, task := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, task.Name()))
		if err != nil {
			continue // the thread ended
		}
		ns, err := strconv.ParseInt(strings.Fields(string(data))[0], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		sum += time.Duration(ns)
	}
	return sum
}
