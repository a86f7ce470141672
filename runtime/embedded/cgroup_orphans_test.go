package embedded

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podCgroupParents are the directories of the runtime's parent cgroup, one
// a hierarchy, found from the pod cgroup of sandbox sb.
func (h *harness) podCgroupParents(sb string) []string {
	h.t.Helper()
	s, err := h.rt.getSandbox(sb)
	if err != nil || s.cgroup == nil {
		h.t.Fatalf("sandbox %s has no cgroup: %v", sb, err)
	}
	var out []string
	for _, f := range s.cgroup.ProcsFiles() {
		out = append(out, filepath.Dir(filepath.Dir(f)))
	}
	return out
}

// leaveOrphans makes n pod cgroups, each with an empty container cgroup,
// under parents, as a runtime that lost their records leaves them, dated
// age ago; they are removed after the test if still there. It returns
// their directories.
func leaveOrphans(t testing.TB, parents []string, n int, age time.Duration) []string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	then := time.Now().Add(-age)
	var dirs []string
	for i := range n {
		for _, parent := range parents {
			pod := filepath.Join(parent, fmt.Sprintf("podorphan-%s-%d", hex.EncodeToString(b[:]), i))
			for _, dir := range []string{pod, filepath.Join(pod, "ctr")} {
				if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
					t.Fatal(err)
				}
			}
			for _, dir := range []string{filepath.Join(pod, "ctr"), pod} {
				if err := os.Chtimes(dir, then, then); err != nil {
					t.Fatal(err)
				}
			}
			dirs = append(dirs, pod)
		}
	}
	t.Cleanup(func() {
		for _, dir := range dirs {
			_ = os.Remove(filepath.Join(dir, "ctr"))
			_ = os.Remove(dir)
		}
	})
	return dirs
}

func countLeft(dirs []string) int {
	n := 0
	for _, dir := range dirs {
		if _, err := os.Stat(dir); err == nil {
			n++
		}
	}
	return n
}

// Thousands of pod cgroups no record names (a day of killed test pods) are
// removed when the runtime starts and by its periodic sweep; the cgroups of
// its own pods stay, that of an adopted running pod and that of a pod whose
// container has exited (empty, but its sandbox's), and so do orphans too
// young to judge (another runtime's pod being started).
func TestOrphanedPodCgroupsAreRemovedAtStartAndBySweep(t *testing.T) {
	h := cgroupHarness(t)
	running, runningCfg := h.uniquePod("running")
	ctr := h.run(running, runningCfg, "c", "sleep", "1000")
	pid := h.pid(ctr)
	exited, exitedCfg := h.uniquePod("exited")
	done := h.run(exited, exitedCfg, "c", "true")
	h.waitState(done, runtimeapi.ContainerState_CONTAINER_EXITED)
	parents := h.podCgroupParents(running)
	own := func() []string {
		var dirs []string
		for _, sb := range []string{running, exited} {
			s, err := h.rt.getSandbox(sb)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range s.cgroup.ProcsFiles() {
				dirs = append(dirs, filepath.Dir(f))
			}
		}
		c, err := h.rt.getContainer(ctr)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range h.rt.cgroupProcs(c) {
			dirs = append(dirs, filepath.Dir(f))
		}
		return dirs
	}()

	old := leaveOrphans(t, parents, 2000, time.Hour)
	young := leaveOrphans(t, parents, 3, 0)
	h.restart()
	if n := countLeft(old); n != 0 {
		t.Errorf("%d of %d orphaned pod cgroups left after the runtime's start", n, len(old))
	}
	if n := countLeft(young); n != len(young) {
		t.Errorf("%d of %d pod cgroups made just now removed: another runtime may be starting their pods", len(young)-n, len(young))
	}
	if n := countLeft(own); n != len(own) {
		t.Errorf("%d of the runtime's own %d pod cgroups removed", len(own)-n, len(own))
	}
	if st := h.status(ctr); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING || h.pid(ctr) != pid {
		t.Fatalf("the adopted container after the start: %v", st)
	}

	// The periodic sweep, as one tick runs it.
	old = leaveOrphans(t, parents, 500, time.Hour)
	h.rt.removeOrphanedCgroups()
	if n := countLeft(old); n != 0 {
		t.Errorf("%d of %d orphaned pod cgroups left after a sweep", n, len(old))
	}
	if n := countLeft(own); n != len(own) {
		t.Errorf("%d of the runtime's own %d pod cgroups removed by the sweep", len(own)-n, len(own))
	}
}

// BenchmarkPodStartBesideOrphanedCgroups is a pod's start (its sandbox, a
// container created and started) beside 5,000 orphaned pod cgroups, left
// (made just now: the sweep spares them for a minute), then once a sweep
// has removed them (sweep-ms). The node had 6,510 after a day of
// killed test pods.
//
//	go test -run '^$' -bench PodStartBesideOrphanedCgroups -benchtime 40x ./runtime/embedded
func BenchmarkPodStartBesideOrphanedCgroups(b *testing.B) {
	h := newHarness(b)
	if ok, why := h.rt.cgroupsEnabled(); !ok {
		b.Skipf("no cgroups here: %s", why)
	}
	ctx := ctxT(b)
	if _, err := h.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: testImage}}); err != nil {
		b.Fatal(err)
	}
	sb, _ := h.uniquePod("parents")
	parents := h.podCgroupParents(sb)
	orphans := leaveOrphans(b, parents, 5000, 0)
	start := func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			sb, sbCfg := h.uniquePod("p")
			id := h.create(sb, sbCfg, containerConfig("c", nil, "sleep", "1000"))
			h.startC(id)
			lat = append(lat, time.Since(t0))
			b.StopTimer()
			if _, err := h.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
				b.Fatal(err)
			}
			if _, err := h.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(percentileMs(lat, 0.50), "start-p50-ms")
		b.ReportMetric(percentileMs(lat, 0.99), "start-p99-ms")
	}
	b.Run("orphans=left", start)
	b.Run("orphans=swept", func(b *testing.B) {
		then := time.Now().Add(-time.Hour)
		for _, dir := range orphans {
			_ = os.Chtimes(dir, then, then)
			_ = os.Chtimes(filepath.Join(dir, "ctr"), then, then)
		}
		t0 := time.Now()
		h.rt.removeOrphanedCgroups()
		sweep := time.Since(t0)
		if n := countLeft(orphans); n != 0 {
			b.Fatalf("%d orphans left", n)
		}
		start(b)
		b.ReportMetric(float64(sweep.Microseconds())/1000, "sweep-ms")
	})
}
