package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/eviction"
	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// podPidsCgroup is the directory of the pod cgroup of the running container id
// in the pids hierarchy, and the name of its pid limit file there.
func podPidsCgroup(t *testing.T, cri *runtime.Client, id string) (dir, maxFile string) {
	t.Helper()
	resp, err := cri.ContainerStatus(t.Context(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	dir, _ = jetlettest.ContainerCgroupDir(t, resp, "pids")
	return filepath.Dir(dir), filepath.Join(filepath.Dir(dir), "pids.max")
}

// A node started without --pod-max-pids limits each pod to 4096 processes:
// its pod cgroup's pids.max.
func TestADefaultNodeLimitsAPodsPids(t *testing.T) {
	requireRoot(t)
	n := startNode(t, shortDir(t), "")
	cri := criClient(t, n)
	n.publish("pids", podJSON("pids", 1, "Always", "exec sleep 3600"))
	st := n.waitStatus("pids", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	_, maxFile := podPidsCgroup(t, cri, st.Containers[0].ContainerID)
	if b, err := os.ReadFile(maxFile); err != nil || strings.TrimSpace(string(b)) != "4096" {
		t.Errorf("%s = %q (%v), want 4096", maxFile, b, err)
	}
}

// The pod's pid limit stops its forks, eviction or not: under
// --pod-max-pids 64, a shell forking 200 sleepers fails to fork (busybox's
// sh then exits 2, and its pid namespace goes with it).
func TestAPodsPidLimitStopsItsForks(t *testing.T) {
	requireRoot(t)
	n := startNode(t, shortDir(t), "", "--pod-max-pids", "64")
	n.publish("forks", podJSON("forks", 1, "Never", `i=0; while [ $i -lt 200 ]; do sleep 3600 & i=$((i+1)); done; echo all forked`))
	st := n.waitStatus("forks", 60*time.Second, func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseFailed || st.Phase == schemas.PhaseSucceeded
	})
	log := n.containerLog(t, "forks")
	if st.Phase != schemas.PhaseFailed || st.Containers[0].ExitCode != 2 || !strings.Contains(log, "can't fork: Resource temporarily unavailable") || strings.Contains(log, "all forked") {
		t.Errorf("200 forks under a limit of 64: %s, exit %d, log %q; want Failed, exit 2, can't fork", st.Phase, st.Containers[0].ExitCode, log)
	}
}

// A fork bomb in a pod, through `jetlet run` as root: pid.available's hard
// threshold is set 1200 below what the host has now, and the pod forks 2500
// sleepers (a bounded loop, and --pod-max-pids 3000 caps it should eviction
// fail). The node goes under PIDPressure and evicts the pod (Failed,
// Evicted, kubelet's message naming pids), its processes are gone, and the
// host has its pids back.
func TestAForkBombIsEvictedForPIDs(t *testing.T) {
	requireRoot(t)
	// The margin is wide enough for the other work of a shared machine to
	// come and go by a thousand tasks either way without deciding.
	const sleepers, margin, podMax = 2500, 1200, 3000
	observer, err := eviction.NewNodeObserver(statsless{}, eviction.NodeObserverConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	observe := func() int64 {
		obs, err := observer.Observe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		available := obs.Signals[eviction.SignalPIDAvailable].Available
		return available.Value()
	}
	available := observe()
	threshold := available - margin
	t.Logf("pid.available %d: threshold %d", available, threshold)
	n := startNode(t, shortDir(t), "", "--eviction-hard", "pid.available<"+strconv.FormatInt(threshold, 10),
		"--eviction-pressure-transition-period", "5s", "--pod-max-pids", strconv.Itoa(podMax))
	cri := criClient(t, n)

	bomb := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do sleep 3600 & i=$((i+1)); done; exec sleep 3600`, sleepers)
	n.publish("bomb", podJSON("bomb", 1, "Always", bomb))
	st := n.waitStatus("bomb", 60*time.Second, func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseRunning || st.Phase == schemas.PhaseFailed
	})
	if st.Phase != schemas.PhaseRunning {
		t.Fatalf("the bomb was not seen running: %+v", st)
	}
	cgroup, maxFile := podPidsCgroup(t, cri, st.Containers[0].ContainerID)
	if b, err := os.ReadFile(maxFile); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(podMax) {
		t.Errorf("%s = %q (%v), want %d", maxFile, b, err, podMax)
	}

	pressured := n.waitRecord(t, 90*time.Second, func(rec schemas.NodeRecord) bool { return hasCondition(rec, corev1.NodePIDPressure) })
	t.Logf("node record under pressure: %+v", pressured.Conditions)
	st = n.waitStatus("bomb", 90*time.Second, func(st *schemas.PodStatus) bool { return st.Reason == schemas.ReasonEvicted })
	if st.Phase != schemas.PhaseFailed || !strings.HasPrefix(st.Message, "The node was low on resource: pids. Threshold quantity: "+strconv.FormatInt(threshold, 10)+", available: ") {
		t.Errorf("bomb's status: %s, %s, %q; want Failed, Evicted, kubelet's message naming pids", st.Phase, st.Reason, st.Message)
	}
	t.Logf("bomb evicted: %s", st.Message)

	// Its processes are gone: the pod cgroup is empty or removed.
	poll.Until(t, 60*time.Second, poll.Msg("the bomb's processes to be gone from "+cgroup), func() bool {
		b, err := os.ReadFile(filepath.Join(cgroup, "cgroup.procs"))
		return os.IsNotExist(err) || (err == nil && len(strings.TrimSpace(string(b))) == 0)
	})
	// And the host has its pids back: the node's pressure clears.
	cleared := n.waitRecord(t, 90*time.Second, func(rec schemas.NodeRecord) bool { return !hasCondition(rec, corev1.NodePIDPressure) })
	t.Logf("node record once cleared: %+v; pid.available %d", cleared.Conditions, observe())
	if st, _ := n.status("bomb"); st.Phase != schemas.PhaseFailed {
		t.Errorf("bomb restarted after its eviction: %+v", st)
	}
}
