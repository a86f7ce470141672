package stats

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crilabels"
)

func TestNanoCores(t *testing.T) {
	const s = int64(time.Second)
	for _, tc := range []struct {
		name      string
		prev, cur cpuSample
		want      int64 // -1: no rate
	}{
		{"one core for two seconds", cpuSample{10 * s, 5e9}, cpuSample{12 * s, 7e9}, 1e9},
		{"a quarter core", cpuSample{10 * s, 0}, cpuSample{14 * s, 1e9}, 250e6},
		{"idle", cpuSample{10 * s, 3e9}, cpuSample{11 * s, 3e9}, 0},
		{"no earlier sample", cpuSample{}, cpuSample{10 * s, 1e9}, -1},
		{"the counter went back (a new container)", cpuSample{10 * s, 9e9}, cpuSample{11 * s, 1e9}, -1},
		{"time did not advance", cpuSample{10 * s, 1e9}, cpuSample{10 * s, 2e9}, -1},
		{"the earlier sample is too old", cpuSample{10 * s, 1e9}, cpuSample{71 * s, 2e9}, -1},
		{"as old as allowed", cpuSample{10 * s, 0}, cpuSample{70 * s, 30e9}, 500e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := nanoCores(tc.prev, tc.cur, time.Minute)
			switch {
			case tc.want < 0 && got != nil:
				t.Errorf("rate %d, want none", *got)
			case tc.want >= 0 && (got == nil || int64(*got) != tc.want):
				t.Errorf("rate %v, want %d", got, tc.want)
			}
		})
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// procStat is a /proc/stat whose cpu line has 27+busy busy ticks (user,
// nice, system, irq, softirq, steal: 1+busy, 2, 3, 6, 7, 8) beside 4 idle
// and 5 iowait ticks and guest time (inside user) that are not counted.
func procStat(busy int) string {
	return "cpu  " + strconv.Itoa(1+busy) + " 2 3 4 5 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 1\nbtime 1700000000\n"
}

func TestNodeCPU(t *testing.T) {
	proc := t.TempDir()
	writeFiles(t, proc, map[string]string{"stat": procStat(100)})
	usage, boot, err := nodeCPU(proc)
	if err != nil {
		t.Fatal(err)
	}
	if want := uint64(127) * 10_000_000; usage != want {
		t.Errorf("usage %d ns, want %d (127 ticks of 10 ms)", usage, want)
	}
	if !boot.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("boot %v", boot)
	}
	writeFiles(t, proc, map[string]string{"stat": "intr 1\n"})
	if _, _, err := nodeCPU(proc); err == nil {
		t.Error("a /proc/stat without a cpu line read without an error")
	}
}

// fakeRuntime reports the stats it holds, each sandbox and container
// created at its id's entry in created (nanoseconds since the epoch).
type fakeRuntime struct {
	sandboxes  []*runtimeapi.PodSandboxStats
	containers []*runtimeapi.ContainerStats
	created    map[string]int64
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	var out []*runtimeapi.PodSandbox
	for _, s := range f.sandboxes {
		out = append(out, &runtimeapi.PodSandbox{Id: s.GetAttributes().GetId(), CreatedAt: f.created[s.GetAttributes().GetId()]})
	}
	return out, nil
}

func (f *fakeRuntime) ListContainers(context.Context, *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	var out []*runtimeapi.Container
	for _, c := range f.containers {
		out = append(out, &runtimeapi.Container{Id: c.GetAttributes().GetId(), CreatedAt: f.created[c.GetAttributes().GetId()]})
	}
	return out, nil
}

func (f *fakeRuntime) ListPodSandboxStats(context.Context, *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	return f.sandboxes, nil
}

func (f *fakeRuntime) ListContainerStats(context.Context, *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	return f.containers, nil
}

func podLabels(uid, container string) map[string]string {
	l := map[string]string{crilabels.LabelPodUID: uid, crilabels.LabelPodNamespace: "default", crilabels.LabelPodName: "p-" + uid}
	if container != "" {
		l[crilabels.LabelContainerName] = container
	}
	return l
}

func cpu(at time.Duration, usage uint64) *runtimeapi.CpuUsage {
	return &runtimeapi.CpuUsage{Timestamp: int64(at), UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: usage}}
}

// Two Summaries: the second has each counter's rate since the first; a
// container whose counter went back has none, and one that is gone is
// forgotten.
func TestSummaryRates(t *testing.T) {
	proc, cgroup := t.TempDir(), t.TempDir()
	writeFiles(t, proc, map[string]string{
		"stat":    procStat(0),
		"meminfo": "MemTotal: 1048576 kB\nMemFree: 524288 kB\n",
	})
	writeFiles(t, cgroup, map[string]string{
		"memory/memory.usage_in_bytes": "314572800\n",
		"memory/memory.stat":           "total_inactive_file 104857600\n",
	})
	const s = time.Second
	rt := &fakeRuntime{
		sandboxes: []*runtimeapi.PodSandboxStats{{
			Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb", Labels: podLabels("u1", "")},
			Linux: &runtimeapi.LinuxPodSandboxStats{
				Cpu:     cpu(10*s, 1e9),
				Memory:  &runtimeapi.MemoryUsage{Timestamp: int64(10 * s), WorkingSetBytes: &runtimeapi.UInt64Value{Value: 200 << 20}},
				Process: &runtimeapi.ProcessUsage{ProcessCount: &runtimeapi.UInt64Value{Value: 3}},
			},
		}},
		containers: []*runtimeapi.ContainerStats{
			{Attributes: &runtimeapi.ContainerAttributes{Id: "c1", Labels: podLabels("u1", "burn")}, Cpu: cpu(10*s, 1e9),
				Memory: &runtimeapi.MemoryUsage{Timestamp: int64(10 * s), WorkingSetBytes: &runtimeapi.UInt64Value{Value: 200 << 20},
					Psi: &runtimeapi.PsiStats{Some: &runtimeapi.PsiData{Total: 5000, Avg10: 1.5}}}},
			{Attributes: &runtimeapi.ContainerAttributes{Id: "c2", Labels: podLabels("u2", "app")}, Cpu: cpu(10*s, 8e9)},
		},
		created: map[string]int64{"sb": int64(3 * s), "c1": int64(4 * s)},
	}
	p, err := New(rt, Config{Node: "n1", ProcDir: proc, CgroupDir: cgroup})
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Pods) != 2 || first.Pods[0].Containers[0].CPU.UsageNanoCores != nil || first.Node.CPU.UsageNanoCores != nil {
		t.Fatalf("first summary: %+v; want two pods, no rates", first)
	}
	if m := first.Node.Memory; *m.WorkingSetBytes != 200<<20 || *m.AvailableBytes != (1<<30)-(200<<20) {
		t.Errorf("node memory: working set %d, available %d", *m.WorkingSetBytes, *m.AvailableBytes)
	}
	if pod, c := first.Pods[0], first.Pods[0].Containers[0]; !pod.StartTime.Equal(&metav1.Time{Time: time.Unix(3, 0)}) || !c.StartTime.Equal(&metav1.Time{Time: time.Unix(4, 0)}) {
		t.Errorf("start times: pod %v, container %v; want when the runtime created them", pod.StartTime, c.StartTime)
	}
	if psi := first.Pods[0].Containers[0].Memory.PSI; psi == nil || psi.Some.Total != 5000 || psi.Some.Avg10 != 1.5 {
		t.Errorf("memory PSI %+v, want the CRI's", psi)
	}

	rt.sandboxes[0].Linux.Cpu = cpu(12*s, 3e9)                   // a core for 2 s
	rt.containers[0].Cpu = cpu(14*s, 2e9)                        // a quarter core for 4 s
	rt.containers[1].Cpu = cpu(12*s, 1e9)                        // restarted: back to 1 s
	writeFiles(t, proc, map[string]string{"stat": procStat(50)}) // 0.5 s of the node's CPU
	second, err := p.Summary(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	pod := second.Pods[0]
	if pod.PodRef.UID != "u1" || pod.PodRef.Name != "p-u1" || *pod.CPU.UsageNanoCores != 1e9 || *pod.ProcessStats.ProcessCount != 3 {
		t.Errorf("pod u1: %+v, cpu %+v; want a core, 3 processes", pod.PodRef, pod.CPU)
	}
	if got := pod.Containers[0].CPU.UsageNanoCores; got == nil || *got != 250e6 {
		t.Errorf("container burn: %v nanocores, want 250000000", got)
	}
	if got := second.Pods[1].Containers[0].CPU.UsageNanoCores; got != nil {
		t.Errorf("a counter that went back has rate %d, want none", *got)
	}
	if got := second.Node.CPU.UsageNanoCores; got == nil || *got == 0 {
		t.Errorf("node rate %v, want one", got)
	}

	rt.sandboxes, rt.containers = nil, nil
	if _, err := p.Summary(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.rates.last["container/c1"]; ok || len(p.rates.last) != 1 {
		t.Errorf("counters kept after their containers went: %v", p.rates.last)
	}
}

// Summaries asked at once (the node service's requests) share the samples
// under the Provider's lock.
func TestSummariesAtOnce(t *testing.T) {
	proc, cgroup := t.TempDir(), t.TempDir()
	writeFiles(t, proc, map[string]string{"stat": procStat(0), "meminfo": "MemTotal: 1048576 kB\nMemFree: 524288 kB\n"})
	writeFiles(t, cgroup, map[string]string{"memory/memory.usage_in_bytes": "1\n", "memory/memory.stat": "total_inactive_file 0\n"})
	rt := &fakeRuntime{containers: []*runtimeapi.ContainerStats{
		{Attributes: &runtimeapi.ContainerAttributes{Id: "c1", Labels: podLabels("u1", "app")}, Cpu: cpu(time.Second, 1e9)},
	}}
	p, err := New(rt, Config{Node: "n1", ProcDir: proc, CgroupDir: cgroup})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := p.Summary(context.Background()); err != nil {
				t.Error(err)
			}
			if _, err := p.Node(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestNewRefusesABadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		rt   Runtime
		cfg  Config
		want string
	}{
		{"no runtime", nil, Config{Node: "n1"}, "needs a runtime"},
		{"no node", &fakeRuntime{}, Config{}, "needs the node's name"},
		{"a negative window", &fakeRuntime{}, Config{Node: "n1", MaxWindow: -time.Second}, "negative max or min window -1s, 0s"},
		{"a min window past the max", &fakeRuntime{}, Config{Node: "n1", MinWindow: time.Minute}, "min window 1m0s is not below the max window 1m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.rt, tc.cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want ErrInvalidConfig saying %q", err, tc.want)
			}
		})
	}
}

func TestNodePressure(t *testing.T) {
	proc := t.TempDir()
	writeFiles(t, proc, map[string]string{
		"pressure/cpu": "some avg10=1.50 avg60=0.25 avg300=0.00 total=1234\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
		"pressure/io":  "some avg10=x avg60=0.00 avg300=0.00 total=0\n",
	})
	cpu, err := nodePressure(proc, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	if cpu.Some.Avg10 != 1.5 || cpu.Some.Avg60 != 0.25 || cpu.Some.Total != 1234000 || cpu.Full.Total != 0 {
		t.Errorf("cpu pressure %+v; want the kernel's, its total in ns", cpu)
	}
	if memory, err := nodePressure(proc, "memory"); memory != nil || err != nil {
		t.Errorf("a kernel without PSI: %+v, %v; want none and no error", memory, err)
	}
	if _, err := nodePressure(proc, "io"); err == nil || !strings.Contains(err.Error(), `pressure/io: "avg10=x"`) {
		t.Errorf("a bad pressure file: %v", err)
	}
}

// Within the min window a counter's rate is the one taken last, and its
// sample is kept: the next rate is taken from it.
func TestMinWindow(t *testing.T) {
	const s = int64(time.Second)
	r := cpuRates{minWindow: 5 * time.Second, maxWindow: time.Minute}
	steps := []struct {
		at, usage int64
		want      int64 // -1: none
	}{
		{10 * s, 0, -1},
		{20 * s, 10e9, 1e9},       // a core over 10 s
		{21 * s, 10e9 + 1e6, 1e9}, // 1 s later: the rate taken last
		{30 * s, 15e9, 500e6},     // since the sample at 20 s
	}
	for i, st := range steps {
		got := r.rate("c", cpuSample{at: st.at, usage: uint64(st.usage)})
		r.done()
		if (st.want < 0) != (got == nil) || got != nil && int64(*got) != st.want {
			t.Errorf("step %d: rate %v, want %d", i, got, st.want)
		}
	}
}
