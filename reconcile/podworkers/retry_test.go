package podworkers

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/reconcile/pleg"
	"github.com/jetlet/jetlet/schemas"
)

// scriptedManager answers SyncPod with the errors of script, one per call
// (nil: success once the script is used up), and records when it was called.
type scriptedManager struct {
	mu     sync.Mutex
	script []error
	calls  []time.Time
}

func (m *scriptedManager) SyncPod(context.Context, *corev1.Pod, *reconcile.PodStatus) reconcile.PodSyncResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, time.Now())
	if len(m.script) == 0 || m.script[0] == nil {
		if len(m.script) > 0 {
			m.script = m.script[1:]
		}
		return reconcile.PodSyncResult{}
	}
	err := m.script[0]
	m.script = m.script[1:]
	return reconcile.PodSyncResult{
		Actions:  []schemas.ActionResult{{Action: schemas.ActionStartContainer, Target: "app", Error: err.Error()}},
		Failures: []*reconcile.ActionError{{Action: schemas.ActionStartContainer, Target: "app", Err: err}},
	}
}

// intervals are the delays between the SyncPod calls so far.
func (m *scriptedManager) intervals() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(m.calls); i++ {
		out = append(out, m.calls[i].Sub(m.calls[i-1]))
	}
	return out
}

func (m *scriptedManager) GetPods(context.Context, bool) ([]*reconcile.RuntimePod, error) {
	return nil, nil
}

func (m *scriptedManager) GetPodStatus(_ context.Context, uid, name, ns string) (*reconcile.PodStatus, error) {
	return &reconcile.PodStatus{UID: uid, Name: name, Namespace: ns}, nil
}

func (m *scriptedManager) KillPod(context.Context, *corev1.Pod, *reconcile.PodStatus, *int64) reconcile.PodSyncResult {
	return reconcile.PodSyncResult{}
}

func (m *scriptedManager) KillOrphan(context.Context, *corev1.Pod, *reconcile.PodStatus, *int64) reconcile.PodSyncResult {
	return reconcile.PodSyncResult{}
}

func (m *scriptedManager) GarbageCollect(context.Context, reconcile.PodStateProvider) error {
	return nil
}

func (m *scriptedManager) ToAPIStatus(pod *corev1.Pod, _ *reconcile.PodStatus) *schemas.PodStatus {
	return &schemas.PodStatus{UID: string(pod.UID), Phase: schemas.PhasePending}
}

type discard struct{}

func (discard) Emit(context.Context, schemas.LifecycleEvent) {}
func (discard) PutStatus(*schemas.PodStatus)                 {}

// runScripted syncs one pod once through Workers over m, then lets the
// background syncs run for d of the bubble's time.
func runScripted(t *testing.T, m *scriptedManager, d time.Duration) {
	relister := pleg.New(m, discard{}, pleg.Config{Node: "n1", Period: time.Second, Logger: zerolog.Nop()})
	w, err := New(m, relister, discard{}, discard{}, Config{Node: "n1", ResyncPeriod: time.Hour, GCPeriod: time.Hour, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { relister.Run(ctx) })
	wg.Go(func() { w.Run(ctx, time.Second) })
	if err := w.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	synctest.Wait() // Run has begun the background syncs
	w.Sync(ctx, Desired{UID: "u1", IntentSeq: 1, ReceivedAt: time.Now(), Intent: &schemas.PodIntent{Op: schemas.OpApply,
		Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"}}}})
	time.Sleep(d)
	cancel()
	wg.Wait()
}

func TestAFailedSyncIsRetriedWithAGrowingDelayUntilItSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &scriptedManager{script: []error{reconcile.ErrCreateContainer, reconcile.ErrCreateContainer, reconcile.ErrRunContainer, nil}}
		runScripted(t, m, 10*time.Minute)
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
		if got := m.intervals(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("syncs %v apart, want %v and none after the success", got, want)
		}
	})
}

func TestAPodInBackOffIsLookedAtEverySecondWithoutGrowing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &scriptedManager{script: []error{reconcile.ErrCrashLoopBackOff, reconcile.ErrImagePullBackOff, reconcile.ErrCrashLoopBackOff, nil}}
		runScripted(t, m, 10*time.Minute)
		want := []time.Duration{time.Second, time.Second, time.Second}
		if got := m.intervals(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("syncs %v apart, want %v and none after the success", got, want)
		}
	})
}
