package podworkers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/pleg"
	"github.com/jetlet/jetlet/schemas"
)

// scriptedManager answers SyncPod with the errors of script, one per call
// (nil: success once the script is used up), and records when it was called.
// The runtime holds a ready sandbox of each pod in running until it is
// killed.
type scriptedManager struct {
	mu      sync.Mutex
	script  []error
	calls   []time.Time
	running map[string]bool
	killed  []string // "KillPod <uid>" or "KillOrphan <uid>", in order
	gcs     int
	// exitedAt, when set, is when the pods' one container exited: their
	// status shows it and ToAPIStatus says Succeeded.
	exitedAt time.Time
	// created, when set for a pod, is when each of its sandboxes was
	// created, newest first, reported as a runtime does (CreatedAt): while
	// the pod runs the newest is ready, the others are not (earlier
	// attempts). Without it a running pod has one ready sandbox of unknown
	// creation.
	created map[string][]time.Time
	// synced is the pod each SyncPod was given last, by uid.
	synced map[string]*corev1.Pod
}

// sandboxes is what the runtime holds of pod uid's sandboxes, newest first;
// the caller holds m.mu.
func (m *scriptedManager) sandboxes(uid string) []*runtimeapi.PodSandboxStatus {
	if !m.running[uid] {
		return nil
	}
	created := m.created[uid]
	if len(created) == 0 {
		return []*runtimeapi.PodSandboxStatus{{Id: "sb-" + uid, State: runtimeapi.PodSandboxState_SANDBOX_READY}}
	}
	var out []*runtimeapi.PodSandboxStatus
	for i, at := range created {
		sb := &runtimeapi.PodSandboxStatus{Id: fmt.Sprintf("sb-%s-%d", uid, len(created)-1-i), State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY, CreatedAt: at.UnixNano()}
		if i == 0 {
			sb.State = runtimeapi.PodSandboxState_SANDBOX_READY
		}
		out = append(out, sb)
	}
	return out
}

func (m *scriptedManager) SyncPod(_ context.Context, pod *corev1.Pod, _ *kubecontainer.PodStatus) kubecontainer.PodSyncResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, time.Now())
	if m.synced == nil {
		m.synced = map[string]*corev1.Pod{}
	}
	m.synced[string(pod.UID)] = pod
	if len(m.script) == 0 || m.script[0] == nil {
		if len(m.script) > 0 {
			m.script = m.script[1:]
		}
		return kubecontainer.PodSyncResult{}
	}
	err := m.script[0]
	m.script = m.script[1:]
	return kubecontainer.PodSyncResult{
		Actions: []kubecontainer.ActionResult{{Action: schemas.ActionStartContainer, Target: "app", Err: err}},
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

func (m *scriptedManager) GetPods(context.Context, bool) ([]*kubecontainer.RuntimePod, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var pods []*kubecontainer.RuntimePod
	for uid := range m.running {
		p := &kubecontainer.RuntimePod{UID: uid, Name: "p-" + uid, Namespace: "default"}
		for _, sb := range m.sandboxes(uid) {
			state := kubecontainer.ContainerExited
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				state = kubecontainer.ContainerRunning
			}
			p.Sandboxes = append(p.Sandboxes, &kubecontainer.Container{ID: sb.Id, State: state})
		}
		if !m.exitedAt.IsZero() {
			p.Containers = []*kubecontainer.Container{{ID: "c-" + uid, State: kubecontainer.ContainerExited}}
		}
		pods = append(pods, p)
	}
	return pods, nil
}

func (m *scriptedManager) GetPodStatus(_ context.Context, uid, name, ns string) (*kubecontainer.PodStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := &kubecontainer.PodStatus{UID: uid, Name: name, Namespace: ns}
	st.SandboxStatuses = m.sandboxes(uid)
	if !m.exitedAt.IsZero() {
		st.ContainerStatuses = []*kubecontainer.ContainerStatus{{ID: "c-" + uid, Name: "app", State: kubecontainer.ContainerExited, FinishedAt: m.exitedAt}}
	}
	return st, nil
}

func (m *scriptedManager) kill(how string, pod *corev1.Pod) kubecontainer.PodSyncResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.killed = append(m.killed, how+" "+string(pod.UID))
	delete(m.running, string(pod.UID))
	return kubecontainer.PodSyncResult{Actions: []kubecontainer.ActionResult{{Action: schemas.ActionKillPodSandbox, Target: string(pod.UID)}}}
}

func (m *scriptedManager) KillPod(_ context.Context, pod *corev1.Pod, _ *kubecontainer.PodStatus, _ *int64) kubecontainer.PodSyncResult {
	return m.kill("KillPod", pod)
}

func (m *scriptedManager) KillOrphan(_ context.Context, pod *corev1.Pod, _ *kubecontainer.PodStatus, _ *int64) kubecontainer.PodSyncResult {
	return m.kill("KillOrphan", pod)
}

func (m *scriptedManager) KillPastDeadline(_ context.Context, pod *corev1.Pod, _ *kubecontainer.PodStatus) kubecontainer.PodSyncResult {
	return m.kill("KillPastDeadline", pod)
}

func (m *scriptedManager) KillEvicted(_ context.Context, pod *corev1.Pod, _ *kubecontainer.PodStatus, _, _ string, _ int64) kubecontainer.PodSyncResult {
	return m.kill("KillEvicted", pod)
}

func (m *scriptedManager) GarbageCollect(context.Context, kubecontainer.PodStateProvider) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gcs++
	return nil
}

func (m *scriptedManager) GarbageCollectPod(ctx context.Context, _ string, pods kubecontainer.PodStateProvider) error {
	return m.GarbageCollect(ctx, pods)
}

func (m *scriptedManager) ToAPIStatus(pod *corev1.Pod, st *kubecontainer.PodStatus) *schemas.PodStatus {
	if len(st.ContainerStatuses) > 0 {
		return &schemas.PodStatus{UID: string(pod.UID), Phase: schemas.PhaseSucceeded}
	}
	return &schemas.PodStatus{UID: string(pod.UID), Phase: schemas.PhasePending}
}

type discard struct{}

func (discard) Emit(context.Context, schemas.LifecycleEvent) {}
func (discard) PutStatus(*schemas.PodStatus)                 {}
func (discard) RefreshStatus(*schemas.PodStatus)             {}

// runScripted syncs one pod once through Workers over m, then lets the
// background syncs run for d of the bubble's time. The workers log to log.
func runScripted(t *testing.T, m *scriptedManager, d time.Duration, log zerolog.Logger) {
	relister, err := pleg.New(m, discard{}, pleg.Config{Node: "n1", Period: time.Second, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(m, relister, discard{}, discard{}, Config{Node: "n1", ResyncPeriod: time.Hour, GCPeriod: time.Hour, Logger: log})
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
		m := &scriptedManager{script: []error{kubecontainer.ErrCreateContainer, kubecontainer.ErrCreateContainer, kubecontainer.ErrRunContainer, nil}}
		runScripted(t, m, 10*time.Minute, zerolog.Nop())
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
		if got := m.intervals(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("syncs %v apart, want %v and none after the success", got, want)
		}
	})
}

func TestAPodInBackOffIsLookedAtEverySecondWithoutGrowing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &scriptedManager{script: []error{kubecontainer.ErrCrashLoopBackOff, kubecontainer.ErrImagePullBackOff, kubecontainer.ErrCrashLoopBackOff, nil}}
		runScripted(t, m, 10*time.Minute, zerolog.Nop())
		want := []time.Duration{time.Second, time.Second, time.Second}
		if got := m.intervals(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("syncs %v apart, want %v and none after the success", got, want)
		}
	})
}

// A failing pod is logged at warn with its error: at once when the error is
// new, and the same error again at most once a minute, though it is retried
// more often.
func TestAFailingSyncIsLoggedAtWarnOnceAMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failures := slices.Repeat([]error{kubecontainer.ErrCreateContainer}, 8) // at 0, 1, 3, 7, 15, 31, 63 and 123 s
		failures = append(failures, kubecontainer.ErrRunContainer, nil)         // a new error at 183 s, then success
		m := &scriptedManager{script: failures}
		var logs bytes.Buffer
		runScripted(t, m, 10*time.Minute, zerolog.New(&logs).Level(zerolog.WarnLevel))
		var got []string
		for line := range strings.Lines(logs.String()) {
			var entry struct{ Level, Message, Error, Pod string }
			if err := json.Unmarshal([]byte(line), &entry); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if entry.Message == "pod sync failed; retrying with back-off" {
				if entry.Level != "warn" || entry.Pod != "default/p" {
					t.Errorf("logged %q", line)
				}
				got = append(got, entry.Error)
			}
		}
		create, run := kubecontainer.ErrCreateContainer.Error(), kubecontainer.ErrRunContainer.Error()
		want := []string{create, create, create, run} // at 0, 63, 123 and 183 s
		if len(got) != len(want) || !strings.Contains(got[0], want[0]) || !strings.Contains(got[2], want[2]) || !strings.Contains(got[3], want[3]) {
			t.Errorf("warnings %q, want one per error per minute: %q", got, want)
		}
	})
}

// Until Start hands over the desired state, nothing is synced, killed or
// collected, however long it takes and whatever the relist sees.
func TestNothingIsSyncedOrCollectedBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &scriptedManager{running: map[string]bool{"wanted": true, "orphan": true}}
		relister, err := pleg.New(m, discard{}, pleg.Config{Node: "n1", Period: time.Second, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		w, err := New(m, relister, discard{}, discard{}, Config{Node: "n1", ResyncPeriod: time.Minute, GCPeriod: time.Minute, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go relister.Run(ctx)
		go w.Run(ctx, time.Second)
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		m.mu.Lock()
		if len(m.calls) != 0 || len(m.killed) != 0 || m.gcs != 0 {
			t.Errorf("before Start: %d syncs, kills %v, %d collections; want none", len(m.calls), m.killed, m.gcs)
		}
		m.mu.Unlock()

		wanted := Desired{UID: "wanted", IntentSeq: 1, ReceivedAt: time.Now(), Intent: &schemas.PodIntent{Op: schemas.OpApply,
			Pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-wanted", Namespace: "default", UID: "wanted"}}}}
		if err := w.Start(ctx, []Desired{wanted}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		m.mu.Lock()
		defer m.mu.Unlock()
		if len(m.calls) == 0 || !slices.Equal(m.killed, []string{"KillOrphan orphan"}) || m.gcs == 0 {
			t.Errorf("after Start: %d syncs, kills %v, %d collections; want the wanted pod synced, the orphan killed, collections", len(m.calls), m.killed, m.gcs)
		}
	})
}

func (m *scriptedManager) PlanPod(*corev1.Pod, *kubecontainer.PodStatus, *corev1.Pod) schemas.PodPlan {
	return schemas.PodPlan{}
}

// The first collection runs at Start, not a period later: what pods that
// went while jetlet was down left (their pod cgroups among it) goes at once.
func TestACollectionRunsAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := &scriptedManager{}
		relister, err := pleg.New(m, discard{}, pleg.Config{Node: "n1", Period: time.Second, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		w, err := New(m, relister, discard{}, discard{}, Config{Node: "n1", ResyncPeriod: time.Hour, GCPeriod: time.Hour, Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go relister.Run(ctx)
		go w.Run(ctx, time.Second)
		if err := w.Start(ctx, nil); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.gcs != 1 {
			t.Errorf("%d collections at Start, want 1", m.gcs)
		}
	})
}
