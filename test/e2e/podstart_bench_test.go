package e2e_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/jetlettest"
)

// podStartBeside is how many pods run on the node before the new ones
// come: a node's pod starts share it with the relists, the statuses and the
// shims of the pods it already runs.
const podStartBeside = 100

// BenchmarkPodStart offers b.N new one-container pods to `jetlet run` at 50
// a second, beside 100 running pods, and reports, measured from outside,
// the time from an intent's publish to its ContainerStarted event (p50,
// p99), and what the pods' shims cost once their containers run: RSS and
// PSS per pod. shim=light runs the light jetlet-shim (the default);
// shim=jetlet runs jetlet itself as each pod's shim, for comparison. The
// pods have a network of their own (the node-local bridge) but with
// net=host, where they are hostNetwork pods: the difference is what a pod's
// network costs. It also reports what each start cost jetlet's process
// (loadCost, per pod), and profiles it with JETLET_E2E_PROFILE.
//
//	go test -run '^$' -bench PodStart -benchtime 100x ./test/e2e
func BenchmarkPodStart(b *testing.B) {
	for _, c := range []struct {
		name        string
		hostNetwork bool
	}{{"shim=light", false}, {"shim=light,net=host", true}, {"shim=jetlet", false}} {
		b.Run(c.name, func(b *testing.B) {
			var extra []string
			if strings.Contains(c.name, "shim=jetlet") {
				extra = append(extra, "--runtime-shim", jetlettest.Binary(b))
			}
			if c.hostNetwork {
				extra = append(extra, mountsTheHost...) // hostNetwork is privileged
			}
			benchPodStart(b, 50, podStartBeside, 500, c.hostNetwork, extra)
		})
	}
}

// BenchmarkPodStartAt100 offers new pods at 100 a second to an empty node:
// with -benchtime 1000x, ten seconds of them. (Not beside 100 more: a
// node-local bridge holds 1,023 pods, the kernel's limit of a bridge's
// ports.)
//
//	go test -run '^$' -bench PodStartAt100 -benchtime 1000x ./test/e2e
func BenchmarkPodStartAt100(b *testing.B) { benchPodStart(b, 100, 0, 1000, false, nil) }

// benchPodStart offers b.N new pods (most at the most) at rate a second,
// beside running ones started first.
func benchPodStart(b *testing.B, rate, running, most int, hostNetwork bool, extra []string) {
	if probeRun(b) {
		return
	}
	if b.N > most {
		b.Skipf("%d pods: at most %d", b.N, most)
	}
	// A subnet for every pod (a test's own is a /24), on a bridge of the
	// bench's own; --max-pods above them all (kubelet's 110 by default).
	bridge, _ := cnitest.Bridge(b)
	n, srv := startNodeWithNATS(b, append([]string{"--workers", "16", "--max-pods", strconv.Itoa(running + b.N),
		"--pod-bridge", bridge, "--pod-cidr", "10.89.0.0/20"}, extra...)...)
	nc := natsConn(b, n)
	beside := make([]string, running)
	for i := range beside {
		beside[i] = fmt.Sprintf("beside-%03d", i)
	}
	statuses := watchStatuses(b, n)
	publishAll(b, n.js, beside, func(i int) []byte { return []byte(podJSON(beside[i], 1, "Always", "exec sleep 3600")) })
	statuses.await(b, beside, runningWith(1), 2*time.Minute)

	var mu sync.Mutex
	sent := map[string]time.Time{}
	var lat []time.Duration
	done := make(chan struct{})
	sub, err := nc.Subscribe("jetlet.event.n1.*."+string(schemas.EventContainerStarted), func(m *nats.Msg) {
		at := time.Now()
		uid := strings.Split(m.Subject, ".")[3]
		mu.Lock()
		defer mu.Unlock()
		if t0, ok := sent[uid]; ok {
			delete(sent, uid)
			lat = append(lat, at.Sub(t0))
			if len(lat) == b.N {
				close(done)
			}
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()

	b.ResetTimer()
	cost := costOf(b, n)
	cpu := startCPUOf(b, n, srv)
	end := profileLoad(b, n, "podstart")
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i := range b.N {
		<-tick.C
		uid := fmt.Sprintf("start-%05d", i)
		mu.Lock()
		sent[uid] = time.Now()
		mu.Unlock()
		body := podJSON(uid, 1, "Always", "exec sleep 3600")
		if hostNetwork {
			body = editPod(b, body, func(p *corev1.Pod) { p.Spec.HostNetwork = true })
		}
		if err := nc.Publish("jetlet.intent.n1."+uid, []byte(body)); err != nil {
			b.Fatal(err)
		}
	}
	tick.Stop()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		b.Fatalf("%d of %d pods started within 2 minutes", len(lat), b.N)
	}
	b.StopTimer()
	end()
	cost.report(b, n, b.N, "pod")
	cpu.report(b, b.N)

	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	// The shims and the upper dirs of every pod, those beside included.
	pods := float64(b.N + running)
	rss, pss := shimMemory(b, n.dataDir)
	b.ReportMetric(float64(rss)/pods/(1<<20), "shim-rss-MiB/pod")
	b.ReportMetric(float64(pss)/pods/(1<<20), "shim-pss-MiB/pod")
	// Disk: the image's layers once, each container's writes in its upper
	// dir (empty for these pods, which write nothing).
	runtimeDir := filepath.Join(n.dataDir, "runtime")
	b.ReportMetric(float64(diskUsage(b, filepath.Join(runtimeDir, "images")))/(1<<20), "image-store-MiB")
	uppers, _ := filepath.Glob(filepath.Join(runtimeDir, "containers", "*", "upper"))
	var upper int64
	for _, u := range uppers {
		upper += diskUsage(b, u)
	}
	b.ReportMetric(float64(upper)/pods/(1<<10), "upper-KiB/pod")
}

// diskUsage is what the files under dir take on disk (allocated blocks),
// each inode once, as du counts.
func diskUsage(b *testing.B, dir string) int64 {
	b.Helper()
	seen := map[uint64]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return err
		}
		if !seen[st.Ino] {
			seen[st.Ino] = true
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return total
}

// shimMemory sums the RSS and PSS of the pod shims of the embedded runtime
// under dataDir, found by their sandbox records.
func shimMemory(b *testing.B, dataDir string) (rss, pss int64) {
	b.Helper()
	shims := podShims(b, dataDir)
	if len(shims.procs) == 0 {
		b.Fatalf("no running pod shim under %s", dataDir)
	}
	for pid := range shims.procs {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			b.Fatal(err)
		}
		rss += smapsKiB(data, "Rss:") << 10
		pss += smapsKiB(data, "Pss:") << 10
	}
	return rss, pss
}

func smapsKiB(data []byte, field string) int64 {
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb
		}
	}
	return 0
}
