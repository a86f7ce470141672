package podworkers

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/reconcile/pleg"
	"github.com/jetlet/jetlet/schemas"
)

// statusLog keeps the statuses stored, with the time of each.
type statusLog struct {
	mu       sync.Mutex
	statuses []*schemas.PodStatus
	at       []time.Time
}

func (l *statusLog) PutStatus(st *schemas.PodStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statuses = append(l.statuses, st)
	l.at = append(l.at, time.Now())
}

func (l *statusLog) RefreshStatus(st *schemas.PodStatus) { l.PutStatus(st) }

// runDeadlinePod syncs a pod with activeDeadlineSeconds 3 through Workers
// over m (whose runtime then holds its sandbox), calls during(start) after
// 1 s, and lets the background syncs run until just before the hourly
// resync. It returns the start and the statuses stored.
func runDeadlinePod(t *testing.T, m *scriptedManager, during func()) (time.Time, *statusLog) {
	statuses := &statusLog{}
	relister := pleg.New(m, discard{}, pleg.Config{Node: "n1", Period: time.Second, Logger: zerolog.Nop()})
	w, err := New(m, relister, discard{}, statuses, Config{Node: "n1", ResyncPeriod: time.Hour, GCPeriod: time.Hour, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { relister.Run(ctx) })
	wg.Go(func() { w.Run(ctx, time.Second) })
	defer func() { cancel(); wg.Wait() }()
	if err := w.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	m.mu.Lock()
	m.running["u1"] = true // the sync makes its sandbox
	m.mu.Unlock()
	deadline := int64(3)
	start := time.Now()
	w.Sync(ctx, Desired{UID: "u1", IntentSeq: 1, ReceivedAt: start, Intent: &schemas.PodIntent{Op: schemas.OpApply,
		Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
			Spec: corev1.PodSpec{ActiveDeadlineSeconds: &deadline}}}})
	time.Sleep(time.Second)
	if during != nil {
		during()
	}
	time.Sleep(time.Hour - 2*time.Second)
	synctest.Wait()
	return start, statuses
}

// A pod past its activeDeadlineSeconds is woken at the deadline, killed
// (KillPastDeadline) and stored Failed with reason DeadlineExceeded; it is
// not synced, nor killed, again.
func TestAPodPastItsActiveDeadlineIsKilledAtItAndStaysFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &scriptedManager{running: map[string]bool{}}
		start, statuses := runDeadlinePod(t, m, nil)
		m.mu.Lock()
		defer m.mu.Unlock()
		if !slices.Equal(m.killed, []string{"KillPastDeadline u1"}) {
			t.Errorf("kills %v, want one KillPastDeadline", m.killed)
		}
		for _, c := range m.calls {
			if !c.Before(start.Add(3 * time.Second)) {
				t.Errorf("SyncPod at %s, after the deadline", c.Sub(start))
			}
		}
		statuses.mu.Lock()
		defer statuses.mu.Unlock()
		last := statuses.statuses[len(statuses.statuses)-1]
		if last.Phase != schemas.PhaseFailed || last.Reason != schemas.ReasonDeadlineExceeded {
			t.Errorf("last status %s/%s, want Failed/DeadlineExceeded", last.Phase, last.Reason)
		}
		if at := statuses.at[len(statuses.at)-1].Sub(start); at != 3*time.Second {
			t.Errorf("Failed stored %s after the start, want at the deadline (3s)", at)
		}
	})
}

// A pod that finished before its deadline keeps its phase past it.
func TestAPodThatFinishedBeforeItsDeadlineKeepsItsPhase(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &scriptedManager{running: map[string]bool{}}
		_, statuses := runDeadlinePod(t, m, func() {
			m.mu.Lock()
			m.exitedAt, m.running["u1"] = time.Now(), false
			m.mu.Unlock()
		})
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.killed) != 0 {
			t.Errorf("kills %v, want none", m.killed)
		}
		statuses.mu.Lock()
		defer statuses.mu.Unlock()
		if last := statuses.statuses[len(statuses.statuses)-1]; last.Phase != schemas.PhaseSucceeded || last.Reason != "" {
			t.Errorf("last status %s/%s, want Succeeded", last.Phase, last.Reason)
		}
	})
}
