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
// over m, calls during(start) after 1 s, and lets the background syncs run
// until just before the hourly resync. A new pod is applied with Sync (whose
// sync makes its sandbox in m's runtime); a pod m runs already is one a
// restarted jetlet finds on the node: its intent is handed over at Start, as
// the consumer recovers it, and synced in the background. It returns the
// start and the statuses stored.
func runDeadlinePod(t *testing.T, m *scriptedManager, during func()) (time.Time, *statusLog) {
	statuses := &statusLog{}
	relister, err := pleg.New(m, discard{}, pleg.Config{Node: "n1", Period: time.Second, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(m, relister, discard{}, statuses, Config{Node: "n1", ResyncPeriod: time.Hour, GCPeriod: time.Hour, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { relister.Run(ctx) })
	wg.Go(func() { w.Run(ctx, time.Second) })
	defer func() { cancel(); wg.Wait() }()
	deadline := int64(3)
	start := time.Now()
	want := Desired{UID: "u1", IntentSeq: 1, ReceivedAt: start, Intent: &schemas.PodIntent{Op: schemas.OpApply,
		Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "u1"},
			Spec: corev1.PodSpec{ActiveDeadlineSeconds: &deadline}}}}
	m.mu.Lock()
	found := m.running["u1"]
	m.mu.Unlock()
	var recovered []Desired
	if found {
		recovered = append(recovered, want)
	}
	if err := w.Start(ctx, recovered); err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	if !found {
		m.mu.Lock()
		m.running["u1"] = true // the sync makes its sandbox
		m.mu.Unlock()
		w.Sync(ctx, want)
	}
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

// After a restart of jetlet a pod's activeDeadlineSeconds counts from its
// oldest sandbox's creation, which the runtime reports, not from the newest
// (a sandbox recreated since) nor from jetlet's first sync of it: a pod whose
// first sandbox was made 10 s ago, with a deadline of 3 s, is past it at
// once, though its ready sandbox is 1 s old.
func TestActiveDeadlineCountsFromTheOldestSandbox(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		m := &scriptedManager{running: map[string]bool{"u1": true}, created: map[string][]time.Time{
			"u1": {now.Add(-time.Second), now.Add(-10 * time.Second)}, // newest first
		}}
		start, statuses := runDeadlinePod(t, m, nil)
		m.mu.Lock()
		defer m.mu.Unlock()
		if !slices.Equal(m.killed, []string{"KillPastDeadline u1"}) {
			t.Errorf("kills %v, want one KillPastDeadline", m.killed)
		}
		if len(m.calls) != 0 {
			t.Errorf("SyncPod called %d times, the first %s after the start; want never: the oldest sandbox puts the deadline 7 s in the past", len(m.calls), m.calls[0].Sub(start))
		}
		statuses.mu.Lock()
		defer statuses.mu.Unlock()
		last := statuses.statuses[len(statuses.statuses)-1]
		if last.Phase != schemas.PhaseFailed || last.Reason != schemas.ReasonDeadlineExceeded {
			t.Errorf("last status %s/%s, want Failed/DeadlineExceeded", last.Phase, last.Reason)
		}
		if at := statuses.at[len(statuses.at)-1].Sub(start); at != 0 {
			t.Errorf("Failed stored %s after the start, want at once (the newest sandbox's deadline would be 2s)", at)
		}
	})
}
