package e2e_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/procstat"
)

// BenchmarkThousandPods brings pods (two containers each) up on the embedded
// runtime through `jetlet run` as root (full isolation, cgroups), at 100 and
// at 1,000 pods:
//
//	go test -run '^$' -bench Thousand -benchtime 1x -timeout 30m ./test/e2e
//
// It reports, measured from outside: running-s, from the first intent
// published until every pod's stored status is Running with both containers
// running, and start-relist-p50-ms and start-relist-p99-ms, the relist
// durations meanwhile (jetlet_relist_duration_seconds, interpolated within
// the histogram's buckets); then jetlet at rest over a quiet window
// (JETLET_THOUSAND_QUIET, default 20s): relist-p50-ms, relist-p99-ms and
// %core-jetlet (its user+system CPU), and at its end jetlet-rss-MiB,
// jetlet-threads, jetlet-fds and shim-rss-MiB/pod; resync-s, every pod's
// intent published again (a no-op sync each) until every result is back;
// delete-s, a delete of every pod until every stored status is Terminated
// and every pod's shim has exited. It fails when a pod's cgroup is left
// behind.
func BenchmarkThousandPods(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("pods with full isolation need jetlet to run as root")
	}
	for _, pods := range []int{100, 1000} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) { benchThousand(b, pods) })
	}
}

func benchThousand(b *testing.B, pods int) {
	quiet := 20 * time.Second
	if v := os.Getenv("JETLET_THOUSAND_QUIET"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		quiet = d
	}
	// A subnet for a thousand pods (a test's own is a /24), on a bridge of
	// the bench's own.
	bridge, _ := cnitest.Bridge(b)
	// --max-pods above the 1,000: admission counts pods (kubelet's 110).
	n, srv := startNodeWithNATS(b, "--workers", "16", "--profiling", "--max-pods", "1100", "--pod-bridge", bridge, "--pod-cidr", "10.89.0.0/20")
	b.Logf("jetlet serves /metrics and /debug/pprof/ on %s", n.proc.HTTPAddr())
	nc := natsConn(b, n)
	statuses := watchStatuses(b, n)
	uids := make([]string, pods)
	intents := make([][]byte, pods)
	for i := range pods {
		uids[i] = fmt.Sprintf("th-%04d", i)
		intents[i] = twoSleepsPodJSON(uids[i])
	}

	b.ResetTimer()
	relist0 := histogram(b, n, "jetlet_relist_duration_seconds")
	cpu := startCPUOf(b, n, srv)
	end := profileLoad(b, n, fmt.Sprintf("thousand-%d-start", pods))
	start := time.Now()
	publishAll(b, n.js, uids, func(i int) []byte { return intents[i] })
	statuses.await(b, uids, runningWith(2), 3*time.Minute)
	end()
	cpu.report(b, pods)
	b.ReportMetric(time.Since(start).Seconds(), "running-s")
	relist1 := histogram(b, n, "jetlet_relist_duration_seconds")
	b.ReportMetric(1000*relist1.since(relist0).quantile(0.5), "start-relist-p50-ms")
	b.ReportMetric(1000*relist1.since(relist0).quantile(0.99), "start-relist-p99-ms")

	// At rest: nothing is asked of jetlet; it relists and keeps its pods.
	cpu0, _ := procstat.CPU(b, n.proc.Pid())
	rest := time.Now()
	time.Sleep(quiet) // the measured window: jetlet runs on its own
	cpu1, _ := procstat.CPU(b, n.proc.Pid())
	b.ReportMetric(100*float64(cpu1-cpu0)/float64(time.Since(rest)), "%core-jetlet")
	relist2 := histogram(b, n, "jetlet_relist_duration_seconds")
	b.ReportMetric(1000*relist2.since(relist1).quantile(0.5), "relist-p50-ms")
	b.ReportMetric(1000*relist2.since(relist1).quantile(0.99), "relist-p99-ms")
	b.ReportMetric(float64(procStatus(b, n.proc.Pid(), "VmRSS:")<<10)/(1<<20), "jetlet-rss-MiB")
	b.ReportMetric(float64(procStatus(b, n.proc.Pid(), "Threads:")), "jetlet-threads")
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", n.proc.Pid()))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(fds)), "jetlet-fds")
	shimRSS, _ := shimMemory(b, n.dataDir)
	b.ReportMetric(float64(shimRSS)/float64(pods)/(1<<20), "shim-rss-MiB/pod")

	// A no-op resync: the same intents again, each synced with nothing to do.
	resync := runLoad(b, n.js, nc, pods, 0,
		func(i int) string { return "jetlet.intent.n1." + uids[i] },
		func(i int) []byte { return intents[i] },
		"jetlet.result.n1.>", intentSeqOf)
	b.ReportMetric(resync.elapsed.Seconds(), "resync-s")
	results := readMsgs[schemas.SyncResult](b, n.js, schemas.StreamResults, "jetlet.result.n1.>")
	for _, r := range results[len(results)-pods:] {
		if r.Outcome != schemas.OutcomeSynced || len(r.Actions) != 0 {
			b.Fatalf("resync of %s: %s %s with %d actions, want Synced with none", r.UID, r.Outcome, r.Error, len(r.Actions))
		}
	}

	shims := podShims(b, n.dataDir)
	end = profileLoad(b, n, fmt.Sprintf("thousand-%d-delete", pods))
	start = time.Now()
	publishAll(b, n.js, uids, func(i int) []byte { return []byte(deleteJSON(uids[i], 2, 30)) })
	statuses.await(b, uids, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseTerminated }, 3*time.Minute)
	end()
	poll.Until(b, time.Minute, func() string { return fmt.Sprintf("%d pod shims to exit", len(shims.running())) }, func() bool {
		return len(shims.running()) == 0
	})
	b.ReportMetric(time.Since(start).Seconds(), "delete-s")
	b.StopTimer()
	b.ReportMetric(0, "ns/op") // the figures above are the result
	if left := shims.cgroupsLeft(); len(left) > 0 {
		b.Errorf("%d pod cgroups left behind after the delete, such as %s", len(left), left[0])
	}
	if z := zombieChildren(b, n.proc.Pid()); z > 0 {
		b.Errorf("jetlet has %d children exited and not reaped", z)
	}
}

// zombieChildren counts the children of pid that have exited and are not
// reaped.
func zombieChildren(b *testing.B, pid int) int {
	b.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // not a process, or gone
		}
		// state and ppid follow the command name, which may hold spaces.
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(pid) {
			n++
		}
	}
	return n
}

// twoSleepsPodJSON is an apply intent for a pod of two containers that sleep
// and exit at once on SIGTERM (a sleep that is PID 1 of its pid namespace
// would ignore it and be killed only at the end of the grace period).
func twoSleepsPodJSON(uid string) []byte {
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"})
	return fmt.Appendf(nil, `{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"},
	    "spec":{"restartPolicy":"Always","terminationGracePeriodSeconds":30,"containers":[
	      {"name":"a","image":"busybox:1.36","imagePullPolicy":"IfNotPresent","command":%s},
	      {"name":"b","image":"busybox:1.36","imagePullPolicy":"IfNotPresent","command":%s}]}}}`,
		uid, uid, cmd, cmd)
}

// runningWith reports whether a pod is Running with its n containers
// running.
func runningWith(n int) func(*schemas.PodStatus) bool {
	return func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseRunning && len(st.Containers) == n &&
			!slices.ContainsFunc(st.Containers, func(c schemas.ContainerStatus) bool { return c.State != schemas.ContainerRunning })
	}
}

// publishAll publishes body(i) to the intent subject of each uid, without
// waiting for each acknowledgement before the next.
func publishAll(b *testing.B, js jetstream.JetStream, uids []string, body func(i int) []byte) {
	b.Helper()
	for i, uid := range uids {
		if _, err := js.PublishAsync("jetlet.intent.n1."+uid, body(i)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatalf("%d intents still unacknowledged after a minute", js.PublishAsyncPending())
	}
}

// statusWatch keeps the latest stored status of each pod of node n1, from a
// watch of jetlet_status.
type statusWatch struct {
	mu      sync.Mutex
	latest  map[string]*schemas.PodStatus // by uid
	updated chan struct{}                 // signalled after latest changes
}

func watchStatuses(b *testing.B, n *node) *statusWatch {
	b.Helper()
	kv, err := n.js.KeyValue(b.Context(), schemas.BucketStatus)
	if err != nil {
		b.Fatal(err)
	}
	w, err := kv.Watch(b.Context(), n.name+".*")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = w.Stop() })
	s := &statusWatch{latest: map[string]*schemas.PodStatus{}, updated: make(chan struct{}, 1)}
	go func() {
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue // nil: the initial values are all in
			}
			var st schemas.PodStatus
			if err := json.Unmarshal(e.Value(), &st); err != nil {
				continue // a reader's problem the other tests catch
			}
			s.mu.Lock()
			s.latest[st.UID] = &st
			s.mu.Unlock()
			select {
			case s.updated <- struct{}{}:
			default:
			}
		}
	}()
	return s
}

// await waits until the latest status of every pod in uids satisfies ok.
func (s *statusWatch) await(b *testing.B, uids []string, ok func(*schemas.PodStatus) bool, timeout time.Duration) {
	b.Helper()
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		missing := slices.IndexFunc(uids, func(uid string) bool {
			st, found := s.latest[uid]
			return !found || !ok(st)
		})
		var last *schemas.PodStatus
		if missing >= 0 {
			last = s.latest[uids[missing]]
		}
		s.mu.Unlock()
		if missing < 0 {
			return
		}
		select {
		case <-s.updated:
		case <-deadline:
			b.Fatalf("waited %s for every pod's status; %s has %+v", timeout, uids[missing], last)
		}
	}
}

// buckets are a Prometheus histogram's cumulative counts by upper bound.
type buckets []struct {
	le    float64
	count float64
}

// histogram reads the buckets of the histogram name from jetlet's /metrics.
func histogram(b *testing.B, n *node, name string) buckets {
	b.Helper()
	var out buckets
	prefix := name + `_bucket{le="`
	for line := range strings.Lines(metricsText(b, n)) {
		rest, found := strings.CutPrefix(line, prefix)
		if !found {
			continue
		}
		le, count, _ := strings.Cut(rest, `"} `)
		bound, err1 := strconv.ParseFloat(le, 64)
		c, err2 := strconv.ParseFloat(strings.TrimSpace(count), 64)
		if err := errors.Join(err1, err2); err != nil {
			b.Fatalf("%s: %v", strings.TrimSpace(line), err)
		}
		out = append(out, struct{ le, count float64 }{bound, c})
	}
	if len(out) == 0 {
		b.Fatalf("/metrics has no %s", name)
	}
	return out
}

// since is what was observed after earlier was read.
func (h buckets) since(earlier buckets) buckets {
	out := slices.Clone(h)
	for i := range out {
		out[i].count -= earlier[i].count
	}
	return out
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile does:
// linearly within the bucket it falls in (the highest finite bound when it
// falls in +Inf); 0 with no observation.
func (h buckets) quantile(q float64) float64 {
	total := h[len(h)-1].count
	if total == 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, bk := range h {
		if bk.count >= rank {
			if math.IsInf(bk.le, 1) {
				return lower
			}
			return lower + (bk.le-lower)*(rank-below)/(bk.count-below)
		}
		lower, below = bk.le, bk.count
	}
	return lower
}

// procStatus is a number field of /proc/<pid>/status (kB for sizes).
func procStatus(b *testing.B, pid int, field string) int64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	return smapsKiB(data, field)
}

// shimSet is the pod shims of the embedded runtime at one moment, each known
// by its pid and start time (a pid alone may be reused), with the pod
// cgroups of their sandboxes.
type shimSet struct {
	procs   map[int]string // pid → start time, /proc/<pid>/stat field 22
	cgroups []string       // the pod cgroups' directories
}

// podShims reads the shims and cgroups of every sandbox under dataDir.
func podShims(b *testing.B, dataDir string) shimSet {
	b.Helper()
	records, err := filepath.Glob(filepath.Join(dataDir, "runtime", "sandboxes", "*", "sandbox.json"))
	if err != nil {
		b.Fatal(err)
	}
	s := shimSet{procs: map[int]string{}}
	for _, rec := range records {
		var sb struct {
			ShimPID int               `json:"shim_pid"`
			Cgroup  map[string]string `json:"cgroup"`
		}
		if err := atomicfile.ReadJSON(rec, &sb); err != nil {
			b.Fatal(err)
		}
		if start, ok := procStart(sb.ShimPID); ok {
			s.procs[sb.ShimPID] = start
		}
		for controller, path := range sb.Cgroup {
			s.cgroups = append(s.cgroups, filepath.Join("/sys/fs/cgroup", controller, path))
		}
	}
	return s
}

// running are the shims still running.
func (s shimSet) running() []int {
	var out []int
	for pid, start := range s.procs {
		if now, ok := procStart(pid); ok && now == start {
			out = append(out, pid)
		}
	}
	return out
}

// cgroupsLeft are the pod cgroups still there.
func (s shimSet) cgroupsLeft() []string {
	var out []string
	for _, dir := range s.cgroups {
		if _, err := os.Stat(dir); err == nil {
			out = append(out, dir)
		}
	}
	return out
}

// procStart is a process's start time (in clock ticks since boot); false
// when there is no such process, or it is a zombie (it has exited).
func procStart(pid int) (string, bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadBytes('\n')
	// The fields after the command name (which may hold spaces) start at
	// state, field 3.
	i := bytes.LastIndexByte(line, ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(string(line[i+1:]))
	if len(fields) < 20 || fields[0] == "Z" {
		return "", false
	}
	return fields[19], true
}
