package e2e_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// containerCgroup reads the cgroup of the running container id as kubelet
// would measure it: its CPU time (cpuacct.usage under v1, cpu.stat's
// usage_usec under v2) and its working set (usage less inactive_file).
type containerCgroup struct {
	cpuDir, memoryDir string
	v2                bool
}

func cgroupOf(t *testing.T, cri *runtime.Client, id string) containerCgroup {
	t.Helper()
	resp, err := cri.ContainerStatus(t.Context(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	cpu, v2 := jetlettest.ContainerCgroupDir(t, resp, "cpuacct")
	memory, _ := jetlettest.ContainerCgroupDir(t, resp, "memory")
	return containerCgroup{cpuDir: cpu, memoryDir: memory, v2: v2}
}

// cpuNanos is the cgroup's CPU time, ns.
func (c containerCgroup) cpuNanos(t *testing.T) uint64 {
	t.Helper()
	if c.v2 {
		return keyOf(t, filepath.Join(c.cpuDir, "cpu.stat"), "usage_usec") * 1000
	}
	b, err := os.ReadFile(filepath.Join(c.cpuDir, "cpuacct.usage"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// workingSet is the cgroup's usage less its inactive file pages, bytes.
func (c containerCgroup) workingSet(t *testing.T) uint64 {
	t.Helper()
	usageFile, statKey := "memory.usage_in_bytes", "total_inactive_file"
	if c.v2 {
		usageFile, statKey = "memory.current", "inactive_file"
	}
	b, err := os.ReadFile(filepath.Join(c.memoryDir, usageFile))
	if err != nil {
		t.Fatal(err)
	}
	usage, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return usage - min(usage, keyOf(t, filepath.Join(c.memoryDir, "memory.stat"), statKey))
}

func keyOf(t *testing.T, path, key string) uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("%s has no %s", path, key)
	return 0
}

// cgroupSample is the cgroup's CPU time and working set, and when (the
// test's monotonic clock) they were read.
type cgroupSample struct {
	at         time.Time
	cpu, bytes uint64
}

func (c containerCgroup) sample(t *testing.T) cgroupSample {
	return cgroupSample{at: time.Now(), cpu: c.cpuNanos(t), bytes: c.workingSet(t)}
}

// top runs jetlet top with args against n and returns its table's rows,
// each a line's fields, the header left out.
func (n *node) top(t *testing.T, args ...string) [][]string {
	t.Helper()
	cmd := exec.Command(jetlettest.Binary(t), append(append([]string{"top"}, args...), "--nats-url", n.proc.NATSURL(), "--data-dir", n.dataDir)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jetlet top %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("$ jetlet top %s\n%s", strings.Join(args, " "), out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var rows [][]string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// row is the row whose first field is name.
func row(t *testing.T, rows [][]string, name string) []string {
	t.Helper()
	for _, r := range rows {
		if r[0] == name {
			return r
		}
	}
	t.Fatalf("no row %s in %v", name, rows)
	return nil
}

// millicores and mebibytes read top's cells (1001m, 200Mi).
func millicores(t *testing.T, cell string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSuffix(cell, "m"), 10, 64)
	if err != nil || !strings.HasSuffix(cell, "m") {
		t.Fatalf("CPU cell %q", cell)
	}
	return n
}

func mebibytes(t *testing.T, cell string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(strings.TrimSuffix(cell, "Mi"), 10, 64)
	if err != nil || !strings.HasSuffix(cell, "Mi") {
		t.Fatalf("memory cell %q", cell)
	}
	return n
}

// rateBounds are the CPU rates, in millicores, that a rate measured between
// a sample taken within [a.at, b.at] and one within [c.at, d.at] can have,
// given the cgroup's own figures at those four moments: its window holds
// [b, c] and lies within [a, d].
func rateBounds(a, b, c, d cgroupSample) (lo, hi float64) {
	lo = float64(c.cpu-b.cpu) / float64(d.at.Sub(a.at).Nanoseconds()) * 1000
	hi = float64(d.cpu-a.cpu) / float64(c.at.Sub(b.at).Nanoseconds()) * 1000
	return lo, hi
}

// Through `jetlet run` with the embedded runtime: a pod burning a core and
// a pod holding 200 MiB. jetlet top pods agrees with their cgroups' own
// files: CPU(cores) within the bounds the cgroup's CPU time read around the
// two samples the rate is taken between allows (plus 1m: top rounds up),
// MEMORY(bytes) between the working sets read before and after. top nodes
// shows the node using at least what the burning pod used over the same
// bracket and no more than its cores, its memory at least the held 200 MiB,
// and percentages of its record's allocatable; the record carries usage;
// the stats endpoint answers in kubelet's Summary JSON.
func TestTopAgreesWithTheCgroups(t *testing.T) {
	requireRoot(t)
	n := startNode(t, shortDir(t), "")
	cri := criClient(t, n)
	n.publish("burn", podJSON("burn", 1, "Always", "while :; do :; done"))
	// The shell keeps the 200 MiB string it read (NULs made into x: a shell
	// string holds none) and waits, its memory resident.
	n.publish("hold", podJSON("hold", 1, "Always", `x=$(head -c 209715200 /dev/zero | tr '\0' x); echo held; while :; do sleep 3600; done`))
	running := func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning }
	burn := cgroupOf(t, cri, n.waitStatus("burn", 60*time.Second, running).Containers[0].ContainerID)
	hold := cgroupOf(t, cri, n.waitStatus("hold", 60*time.Second, running).Containers[0].ContainerID)
	poll.Until(t, 60*time.Second, poll.Msg("the hold pod to hold 200 MiB"), func() bool {
		return strings.Contains(n.containerLog(t, "hold"), "held")
	})

	// Pods: the first top leaves the node a sample of each container,
	// the second's rate is taken since it.
	a := burn.sample(t)
	n.top(t, "pods")
	b := burn.sample(t)
	// A window long beside the calls' own time keeps the bounds close.
	poll.Until(t, 90*time.Second, poll.Msg("the burning pod to use 4 s of CPU"), func() bool {
		return burn.cpuNanos(t)-b.cpu >= 4e9
	})
	c, heldBefore := burn.sample(t), hold.workingSet(t)
	rows := n.top(t, "pods")
	d, heldAfter := burn.sample(t), hold.workingSet(t)
	lo, hi := rateBounds(a, b, c, d)
	got := millicores(t, row(t, rows, "p-burn")[1])
	t.Logf("p-burn: top %dm; its cgroup's CPU time allows [%.1fm, %.1fm]", got, lo, hi)
	if float64(got) < lo || float64(got) > hi+1 {
		t.Errorf("top pods: p-burn uses %dm; its cgroup's CPU time says [%.1fm, %.1fm]", got, lo, hi)
	}
	held := mebibytes(t, row(t, rows, "p-hold")[2])
	t.Logf("p-hold: top %dMi; its cgroup's working set %d then %d bytes", held, heldBefore, heldAfter)
	if lo, hi := min(heldBefore, heldAfter)>>20, max(heldBefore, heldAfter)>>20; held < lo || held > hi || held < 200 {
		t.Errorf("top pods: p-hold holds %dMi; its cgroup's working set was %dMi then %dMi (and it holds 200Mi)", held, lo, hi)
	}
	if r := row(t, n.top(t, "pods", "--containers"), "p-burn"); len(r) != 4 || r[1] != "app" {
		t.Errorf("top pods --containers: %v, want POD NAME CPU MEMORY", r)
	}

	// Nodes: the node's rate over a window bracketed as above is at least
	// the burning pod's over the inner bracket.
	rec := n.waitRecord(t, 60*time.Second, func(r schemas.NodeRecord) bool {
		_, cpu := r.Usage[corev1.ResourceCPU]
		memory := r.Usage[corev1.ResourceMemory]
		return cpu && memory.Value() >= 200<<20
	})
	t.Logf("the node record's usage: %v", rec.Usage)
	a = burn.sample(t)
	n.top(t, "nodes")
	b = burn.sample(t)
	poll.Until(t, 60*time.Second, poll.Msg("the burning pod to use 2 s of CPU"), func() bool {
		return burn.cpuNanos(t)-b.cpu >= 2e9
	})
	c = burn.sample(t)
	nodeRow := row(t, n.top(t, "nodes"), n.name)
	d = burn.sample(t)
	allocatable, capacity := rec.Allocatable[corev1.ResourceCPU], rec.Capacity[corev1.ResourceCPU]
	// /proc/stat counts in ticks of 10 ms per core: a window's two ends
	// may each be a tick off on every core.
	slack := float64(2*capacity.Value()*10e6) / float64(c.at.Sub(b.at).Nanoseconds()) * 1000
	lo, hi = rateBounds(a, b, c, d)
	cpu := millicores(t, nodeRow[1])
	t.Logf("node: top %dm; the burning pod's cgroup alone allows [%.1fm, %.1fm], /proc/stat's ticks %.1fm either way", cpu, lo, hi, slack)
	if float64(cpu) < lo-slack || float64(cpu) > float64(capacity.MilliValue())+slack+1 {
		t.Errorf("top nodes: %dm; the burning pod alone used at least %.1fm (less %.1fm of ticks), the node has %dm", cpu, lo, slack, capacity.MilliValue())
	}
	if want := strconv.FormatInt(cpu*100/allocatable.MilliValue(), 10) + "%"; nodeRow[2] != want {
		t.Errorf("top nodes: CPU%% %s for %dm of %s allocatable, want %s", nodeRow[2], cpu, allocatable.String(), want)
	}
	memory, allocMemory := mebibytes(t, nodeRow[3]), rec.Allocatable[corev1.ResourceMemory]
	if memory < 200 || int64(memory)<<20 > rec.Capacity.Memory().Value() {
		t.Errorf("top nodes: %dMi; the node holds at least the pod's 200Mi, and has %s", memory, rec.Capacity.Memory())
	}
	if want := int64(float64(memory<<20) / float64(allocMemory.Value()) * 100); nodeRow[4] != strconv.FormatInt(want, 10)+"%" && nodeRow[4] != strconv.FormatInt(want+1, 10)+"%" {
		t.Errorf("top nodes: MEMORY%% %s for %dMi of %s, want %d%%", nodeRow[4], memory, allocMemory.String(), want)
	}

	// The stats endpoint's reply is kubelet's Summary, by its JSON names.
	msg, err := n.js.Conn().Request(schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}.NodeService(n.name, schemas.EndpointStats), nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"nodeName":"n1"`, `"podRef":{"name":"p-burn","namespace":"default","uid":"burn"}`, `"usageCoreNanoSeconds":`, `"workingSetBytes":`, `"containers":[{"name":"app"`} {
		if !strings.Contains(string(msg.Data), key) {
			t.Errorf("the stats reply has no %s: %s", key, msg.Data)
		}
	}
	var summary statsapi.Summary
	if err := json.Unmarshal(msg.Data, &summary); err != nil {
		t.Fatal(err)
	}
	if summary.Node.Memory == nil || summary.Node.CPU == nil || len(summary.Pods) != 2 {
		t.Errorf("summary: node %+v, %d pods", summary.Node, len(summary.Pods))
	}
	if _, err := os.Stat("/proc/pressure/cpu"); err == nil && (summary.Node.CPU.PSI == nil || summary.Node.IO == nil) {
		t.Errorf("the kernel has PSI, the node's summary none: cpu %+v, io %+v", summary.Node.CPU, summary.Node.IO)
	}
	if _, err := os.Stat("/proc/pressure/cpu"); err == nil && burn.v2 {
		for _, p := range summary.Pods {
			if p.Containers[0].CPU.PSI == nil {
				t.Errorf("pod %s: no CPU PSI under cgroup v2 on a kernel with PSI", p.PodRef.Name)
			}
		}
	}
}
