package eviction

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/jetlet/jetlet/schemas"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newManager is a manager of node with the thresholds the flags give.
func newManager(t *testing.T, node *fakeNode, hard, soft, grace, minReclaim string, mod func(*Config)) (*Manager, *clocktesting.FakePassiveClock) {
	t.Helper()
	thresholds, err := ParseThresholds(hard, soft, grace, minReclaim)
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakePassiveClock(start)
	cfg := Config{Thresholds: thresholds, Clock: clock}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(node, node, node, node, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, clock
}

func condition(m *Manager, t corev1.NodeConditionType) schemas.NodeCondition {
	for _, c := range m.Conditions() {
		if c.Type == t {
			return c
		}
	}
	return schemas.NodeCondition{}
}

// changed says whether Changed has a change waiting, and takes it.
func changed(m *Manager) bool {
	select {
	case <-m.Changed():
		return true
	default:
		return false
	}
}

// usingMemory is a pod whose one container of its name uses bytes.
func usingMemory(bytes int64) PodUsage {
	return PodUsage{MemoryWorkingSet: bytes}
}

func TestHardThresholdEvictsOnePodAtOnce(t *testing.T) {
	node := newFakeNode()
	node.set(SignalMemoryAvailable, mi(10), mi(1024))
	// Below their requests, the one nearer to its request ranks first; the
	// critical pod exceeds its requests, so it ranks before both.
	node.addPod(newPod("critical", SystemCriticalPriority, nil), usingMemory(mi(300)))
	node.addPod(newPod("far-below", 0, memoryRequest("500Mi")), usingMemory(mi(40)))
	node.addPod(newPod("near", 0, memoryRequest("500Mi")), usingMemory(mi(60)))
	m, _ := newManager(t, node, "memory.available<100Mi", "", "", "", nil)

	if c := condition(m, corev1.NodeMemoryPressure); c.Status != corev1.ConditionFalse || c.Reason != "KubeletHasSufficientMemory" || !c.LastTransitionTime.Equal(start) {
		t.Fatalf("before any synchronize: %+v", c)
	}
	m.synchronize(context.Background())

	want := []eviction{{uid: "near", grace: 1, reason: "Evicted",
		message: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 10Mi. "}}
	if got := node.evictions(); !slices.Equal(got, want) {
		t.Fatalf("evictions = %+v\n want %+v: one pod, the critical one skipped, the hard grace period", got, want)
	}
	c := condition(m, corev1.NodeMemoryPressure)
	if c.Status != corev1.ConditionTrue || c.Reason != "KubeletHasInsufficientMemory" || c.Message != "kubelet has insufficient memory available" || !c.LastTransitionTime.Equal(start) {
		t.Fatalf("MemoryPressure = %+v", c)
	}
	if !slices.Equal(m.Pressure(), []corev1.NodeConditionType{corev1.NodeMemoryPressure}) || !changed(m) {
		t.Fatalf("pressure = %v; want MemoryPressure, announced on Changed", m.Pressure())
	}
	if d := condition(m, corev1.NodeDiskPressure); d.Status != corev1.ConditionFalse || d.Reason != "KubeletHasNoDiskPressure" {
		t.Fatalf("DiskPressure = %+v", d)
	}

	// Still short (10Mi and 60Mi freed): the next pod, one more.
	m.synchronize(context.Background())
	if got := node.evictedUIDs(); !slices.Equal(got, []string{"near", "far-below"}) {
		t.Fatalf("evicted %v", got)
	}
	// Enough now (110Mi): no more, the critical pod never.
	m.synchronize(context.Background())
	if got := node.evictedUIDs(); len(got) != 2 {
		t.Fatalf("evicted %v; want no third eviction once memory is back", got)
	}
	if changed(m) {
		t.Fatal("Changed without a change: MemoryPressure stays True for the transition period")
	}
}

func TestMemoryMessageNamesContainers(t *testing.T) {
	node := newFakeNode()
	node.set(SignalMemoryAvailable, 57964<<10, mi(1024))
	pod := newPod("web", 0, nil)
	pod.Spec.Containers[0].Name = "app"
	ws := int64(4523 << 10)
	node.addPod(pod, PodUsage{MemoryWorkingSet: ws, Containers: []ContainerUsage{{Name: "app", MemoryWorkingSet: &ws}}})
	m, _ := newManager(t, node, "memory.available<100Mi", "", "", "", nil)
	m.synchronize(context.Background())
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 57964Ki. Container app was using 4523Ki, request is 0, has larger consumption of memory. "
	if got := node.evictions(); len(got) != 1 || got[0].message != want {
		t.Fatalf("evictions = %+v\nwant the message %q", got, want)
	}
}

func TestSoftThresholdWaitsForItsGracePeriod(t *testing.T) {
	node := newFakeNode()
	node.set(SignalMemoryAvailable, mi(400), mi(1024))
	pod := newPod("long-grace", 0, nil)
	pod.Spec.TerminationGracePeriodSeconds = ptr(int64(60))
	node.addPod(pod, usingMemory(mi(300)))
	m, clock := newManager(t, node, "", "memory.available<500Mi", "memory.available=1m", "", func(c *Config) { c.MaxPodGracePeriodSeconds = 30 })
	ctx := context.Background()

	m.synchronize(ctx)
	if condition(m, corev1.NodeMemoryPressure).Status != corev1.ConditionTrue {
		t.Fatal("a soft threshold met sets the condition at once")
	}
	clock.SetTime(start.Add(59 * time.Second))
	m.synchronize(ctx)
	if got := node.evictions(); len(got) != 0 {
		t.Fatalf("evicted %+v before the grace period is over", got)
	}

	// Not met for a moment: the grace period starts again.
	node.set(SignalMemoryAvailable, mi(600), mi(1024))
	clock.SetTime(start.Add(70 * time.Second))
	m.synchronize(ctx)
	node.set(SignalMemoryAvailable, mi(400), mi(1024))
	clock.SetTime(start.Add(80 * time.Second))
	m.synchronize(ctx)
	clock.SetTime(start.Add(139 * time.Second))
	m.synchronize(ctx)
	if got := node.evictions(); len(got) != 0 {
		t.Fatalf("evicted %+v: the threshold has been met again only 59s", got)
	}
	clock.SetTime(start.Add(140 * time.Second))
	m.synchronize(ctx)
	if got := node.evictions(); len(got) != 1 || got[0].grace != 30 {
		t.Fatalf("evictions = %+v; want one, its grace period the pod's capped at --eviction-max-pod-grace-period", got)
	}
}

func TestEvictionGracePeriod(t *testing.T) {
	hard := Threshold{Signal: SignalMemoryAvailable}
	soft := Threshold{Signal: SignalMemoryAvailable, GracePeriod: time.Minute}
	tests := []struct {
		name      string
		threshold Threshold
		maxGrace  int64
		own       *int64
		want      int64
	}{
		{"hard: kubelet's immediate eviction", hard, 30, ptr(int64(60)), 1},
		{"soft: the pod's own when shorter", soft, 30, ptr(int64(10)), 10},
		{"soft: capped", soft, 30, ptr(int64(60)), 30},
		{"soft: the cap when the pod says nothing", soft, 30, nil, 30},
		{"soft: the default cap, 0, kills at once", soft, 0, ptr(int64(60)), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manager{cfg: Config{MaxPodGracePeriodSeconds: tc.maxGrace}}
			pod := &corev1.Pod{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: tc.own}}
			if got := m.evictionGracePeriod(tc.threshold, pod); got != tc.want {
				t.Fatalf("grace period = %d; want %d", got, tc.want)
			}
		})
	}
}

func TestPressureTransitionPeriod(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config time.Duration
		period time.Duration
	}{
		{"kubelet's default", 0, 5 * time.Minute},
		{"configured", time.Minute, time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newFakeNode()
			node.set(SignalPIDAvailable, 50, 1000)
			m, clock := newManager(t, node, "pid.available<100", "", "", "", func(c *Config) { c.PressureTransitionPeriod = tc.config })
			ctx := context.Background()
			m.synchronize(ctx)
			if c := condition(m, corev1.NodePIDPressure); c.Status != corev1.ConditionTrue || c.Reason != "KubeletHasInsufficientPID" || !c.LastTransitionTime.Equal(start) || !changed(m) {
				t.Fatalf("PIDPressure = %+v; want True since the start, announced", c)
			}

			// The threshold is met for the last time 10s in.
			clock.SetTime(start.Add(10 * time.Second))
			m.synchronize(ctx)
			node.set(SignalPIDAvailable, 500, 1000)
			clock.SetTime(start.Add(20 * time.Second))
			m.synchronize(ctx)
			clock.SetTime(start.Add(10*time.Second + tc.period - time.Nanosecond))
			m.synchronize(ctx)
			if c := condition(m, corev1.NodePIDPressure); c.Status != corev1.ConditionTrue || changed(m) {
				t.Fatalf("PIDPressure = %+v; want True until the transition period after the last time it was met", c)
			}
			end := start.Add(10*time.Second + tc.period)
			clock.SetTime(end)
			m.synchronize(ctx)
			c := condition(m, corev1.NodePIDPressure)
			if c.Status != corev1.ConditionFalse || c.Reason != "KubeletHasSufficientPID" || c.Message != "kubelet has sufficient PID available" || !c.LastTransitionTime.Equal(end) || !changed(m) {
				t.Fatalf("PIDPressure = %+v; want False since %v, announced", c, end)
			}
		})
	}
}

func TestMinimumReclaim(t *testing.T) {
	for _, tc := range []struct {
		name       string
		minReclaim string
		want       []string
	}{
		{"without: evictions stop at the threshold", "", []string{"a"}},
		{"with: evictions go on until the threshold plus the minimum is available", "memory.available=200Mi", []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := newFakeNode()
			node.set(SignalMemoryAvailable, mi(50), mi(1024))
			node.addPod(newPod("a", 0, nil), usingMemory(mi(100)))
			node.addPod(newPod("b", 0, nil), usingMemory(mi(90)))
			node.addPod(newPod("c", 0, nil), usingMemory(mi(80)))
			m, _ := newManager(t, node, "memory.available<100Mi", "", "", tc.minReclaim, nil)
			for range 4 {
				m.synchronize(context.Background())
			}
			if got := node.evictedUIDs(); !slices.Equal(got, tc.want) {
				t.Fatalf("evicted %v; want %v (available now %dMi)", got, tc.want, node.available(SignalMemoryAvailable)>>20)
			}
		})
	}
}

func TestReclaimBeforeEvicting(t *testing.T) {
	const gi = 1 << 30
	tests := []struct {
		name             string
		hard, minReclaim string
		signal           Signal
		dedicatedImageFs bool
		splitContainerFs bool
		// garbage is what unused images free, deadContainers what dead
		// containers free, of signal's file system.
		garbage, deadContainers int64
		wantReclaimed           bool
		wantEvicted             bool
	}{
		{name: "images freed enough: no eviction", hard: "nodefs.available<10%", signal: SignalNodeFsAvailable,
			garbage: 10 * gi, wantReclaimed: true},
		{name: "images freed too little: eviction", hard: "nodefs.available<10%", signal: SignalNodeFsAvailable,
			garbage: 2 * gi, wantReclaimed: true, wantEvicted: true},
		{name: "freed enough for the threshold, not for its minimum reclaim: eviction", hard: "nodefs.available<10%", minReclaim: "nodefs.available=5Gi",
			signal: SignalNodeFsAvailable, garbage: 7 * gi, wantReclaimed: true, wantEvicted: true},
		{name: "imagefs on one file system", hard: "imagefs.available<10%", signal: SignalImageFsAvailable,
			garbage: 10 * gi, wantReclaimed: true},
		{name: "a dedicated imagefs: nodefs pressure is not relieved by images", hard: "nodefs.available<10%", signal: SignalNodeFsAvailable,
			dedicatedImageFs: true, garbage: 10 * gi, wantEvicted: true},
		{name: "a dedicated imagefs: imagefs pressure is", hard: "imagefs.available<10%", signal: SignalImageFsAvailable,
			dedicatedImageFs: true, garbage: 10 * gi, wantReclaimed: true},
		{name: "memory is not reclaimed from images", hard: "memory.available<10%", signal: SignalMemoryAvailable,
			garbage: 10 * gi, wantEvicted: true},
		// kubelet's buildSignalToNodeReclaimFuncs with a split image fs.
		{name: "split image fs: imagefs pressure is relieved by images", hard: "imagefs.available<10%", signal: SignalImageFsAvailable,
			dedicatedImageFs: true, splitContainerFs: true, garbage: 10 * gi, wantReclaimed: true},
		{name: "split image fs: imagefs pressure is not relieved by dead containers", hard: "imagefs.available<10%", signal: SignalImageFsAvailable,
			dedicatedImageFs: true, splitContainerFs: true, deadContainers: 10 * gi, wantEvicted: true},
		{name: "split image fs: nodefs pressure is relieved by dead containers", hard: "nodefs.available<10%", signal: SignalNodeFsAvailable,
			dedicatedImageFs: true, splitContainerFs: true, deadContainers: 10 * gi, wantReclaimed: true},
		{name: "split image fs: nodefs pressure is not relieved by images", hard: "nodefs.available<10%", signal: SignalNodeFsAvailable,
			dedicatedImageFs: true, splitContainerFs: true, garbage: 10 * gi, wantEvicted: true},
		{name: "split image fs: containerfs pressure (nodefs's threshold) evicts at once", hard: "nodefs.available<10%", signal: SignalContainerFsAvailable,
			dedicatedImageFs: true, splitContainerFs: true, garbage: 10 * gi, deadContainers: 10 * gi, wantEvicted: true},
		{name: "a dedicated imagefs: containerfs takes imagefs's threshold", hard: "imagefs.available<10%", signal: SignalContainerFsAvailable,
			dedicatedImageFs: true, wantEvicted: true},
		{name: "a containerfs threshold of the flags is ignored", hard: "containerfs.available<10%", signal: SignalContainerFsAvailable,
			dedicatedImageFs: true, splitContainerFs: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := newFakeNode()
			node.dedicatedImageFs, node.splitContainerFs = tc.dedicatedImageFs, tc.splitContainerFs
			node.set(tc.signal, 5*gi, 100*gi)
			node.garbage[tc.signal] = tc.garbage
			node.deadContainers[tc.signal] = tc.deadContainers
			node.addPod(newPod("small", 0, nil), diskUsed("small", mi(1), mi(1), 0))
			node.addPod(newPod("big", 0, nil), diskUsed("big", mi(900), mi(500), mi(100)))
			m, _ := newManager(t, node, tc.hard, "", "", tc.minReclaim, nil)
			m.synchronize(context.Background())

			if reclaimed := node.uncollected() < tc.garbage+tc.deadContainers; reclaimed != tc.wantReclaimed {
				t.Errorf("reclaimed = %v; want %v", reclaimed, tc.wantReclaimed)
			}
			evicted := node.evictedUIDs()
			if tc.wantEvicted != (len(evicted) == 1) {
				t.Fatalf("evicted %v; want an eviction: %v", evicted, tc.wantEvicted)
			}
			// Under imagefs pressure with a split image fs no pod's disk
			// counts: the first of equal priority goes.
			byDisk := tc.signal != SignalMemoryAvailable && (!tc.splitContainerFs || tc.signal != SignalImageFsAvailable)
			if tc.wantEvicted && byDisk && evicted[0] != "big" {
				t.Fatalf("evicted %v; want the pod using the most disk", evicted)
			}
		})
	}
}

func TestNothingToEvict(t *testing.T) {
	node := newFakeNode()
	node.set(SignalMemoryAvailable, mi(50), mi(1024))
	node.addPod(newPod("critical", SystemCriticalPriority, nil), usingMemory(mi(500)))
	m, _ := newManager(t, node, "memory.available<100Mi", "", "", "", nil)
	m.synchronize(context.Background())
	if got := node.evictions(); len(got) != 0 {
		t.Fatalf("evicted %+v; a critical pod is never evicted", got)
	}
	if !slices.Equal(m.Pressure(), []corev1.NodeConditionType{corev1.NodeMemoryPressure}) {
		t.Fatalf("pressure = %v; the node is under pressure all the same", m.Pressure())
	}
}

type failingObserver struct{ *fakeNode }

func (failingObserver) Observe(context.Context) (Observations, error) {
	return Observations{}, errors.New("no cgroup")
}

func TestObserveFailureChangesNothing(t *testing.T) {
	node := newFakeNode()
	node.addPod(newPod("a", 0, nil), usingMemory(mi(500)))
	thresholds, _ := ParseThresholds("memory.available<100Mi", "", "", "")
	m, err := New(failingObserver{node}, node, node, node, Config{Thresholds: thresholds})
	if err != nil {
		t.Fatal(err)
	}
	m.synchronize(context.Background())
	if len(node.evictions()) != 0 || len(m.Pressure()) != 0 || changed(m) {
		t.Fatal("a failed observation must leave pods and conditions alone")
	}
}

func TestNewRefuses(t *testing.T) {
	node := newFakeNode()
	for _, tc := range []struct {
		name string
		new  func() (*Manager, error)
	}{
		{"no observer", func() (*Manager, error) { return New(nil, node, node, node, Config{}) }},
		{"no killer", func() (*Manager, error) { return New(node, node, node, nil, Config{}) }},
		{"negative period", func() (*Manager, error) { return New(node, node, node, node, Config{Period: -time.Second}) }},
		{"negative transition period", func() (*Manager, error) {
			return New(node, node, node, node, Config{PressureTransitionPeriod: -time.Second})
		}},
		{"negative max pod grace period", func() (*Manager, error) {
			return New(node, node, node, node, Config{MaxPodGracePeriodSeconds: -1})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.new(); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v; want ErrInvalidConfig", err)
			}
		})
	}
	m, err := New(node, node, node, node, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if m.cfg.Period != 10*time.Second || m.cfg.PressureTransitionPeriod != 5*time.Minute {
		t.Fatalf("defaults: period %v, transition %v; want kubelet's 10s and 5m", m.cfg.Period, m.cfg.PressureTransitionPeriod)
	}
}

// Run synchronizes at once and then every period, one eviction each while
// the pressure lasts, and returns when its context ends.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := newFakeNode()
		node.set(SignalMemoryAvailable, mi(10), mi(1024))
		for _, name := range []string{"a", "b", "c"} {
			node.addPod(newPod(name, 0, nil), usingMemory(mi(20)))
		}
		thresholds, _ := ParseThresholds("memory.available<100Mi", "", "", "")
		m, err := New(node, node, node, node, Config{Thresholds: thresholds, Period: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.Run(ctx)
		}()
		synctest.Wait()
		if got := len(node.evictions()); got != 1 {
			t.Fatalf("%d evictions at start; want 1", got)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := len(node.evictions()); got != 2 {
			t.Fatalf("%d evictions after one period; want 2", got)
		}
		cancel()
		<-done
	})
}

// Without thresholds Run has nothing to watch and returns at once.
func TestRunWithoutThresholds(t *testing.T) {
	node := newFakeNode()
	m, err := New(node, node, node, node, Config{})
	if err != nil {
		t.Fatal(err)
	}
	m.Run(context.Background())
	if node.observed != 0 {
		t.Fatal("observed without thresholds")
	}
}
