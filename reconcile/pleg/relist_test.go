package pleg

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// fakeLister is a runtime that is down until up is set, then holds pods.
type fakeLister struct {
	mu   sync.Mutex
	up   bool
	pods []*kubecontainer.RuntimePod
}

var errRuntimeDown = errors.New("runtime unavailable")

func (f *fakeLister) GetPods(context.Context, bool) ([]*kubecontainer.RuntimePod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.up {
		return nil, errRuntimeDown
	}
	return f.pods, nil
}

func (f *fakeLister) GetPodStatus(_ context.Context, uid, name, ns string) (*kubecontainer.PodStatus, error) {
	return &kubecontainer.PodStatus{UID: uid, Name: name, Namespace: ns}, nil
}

// newRelister is New, failing the test on a refusal.
func newRelister(t *testing.T, lister PodLister, emit kubecontainer.Emitter, cfg Config) *Relister {
	t.Helper()
	r, err := New(lister, emit, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	discard := kubecontainer.EmitterFunc(func(context.Context, schemas.LifecycleEvent) {})
	for _, tc := range []struct {
		name   string
		lister PodLister
		emit   kubecontainer.Emitter
		cfg    Config
	}{
		{"no lister", nil, discard, Config{Node: "n1"}},
		{"no emitter", &fakeLister{}, nil, Config{Node: "n1"}},
		{"no node", &fakeLister{}, discard, Config{}},
		{"node not a DNS-1123 label", &fakeLister{}, discard, Config{Node: "N_1"}},
		{"negative period", &fakeLister{}, discard, Config{Node: "n1", Period: -time.Second}},
		{"negative evented period", &fakeLister{}, discard, Config{Node: "n1", EventedPeriod: -time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r, err := New(tc.lister, tc.emit, tc.cfg); !errors.Is(err, ErrInvalidConfig) || r != nil {
				t.Errorf("New = %v, %v; want nil, ErrInvalidConfig", r, err)
			}
		})
	}
	// Zero periods are the defaults: 1s, and Period while the stream is up.
	r := newRelister(t, &fakeLister{}, discard, Config{Node: "n1"})
	if r.cfg.Period != time.Second || r.cfg.EventedPeriod != time.Second {
		t.Errorf("periods %s, %s; want 1s, 1s", r.cfg.Period, r.cfg.EventedPeriod)
	}
}

func TestStatusFailsWhileTheRuntimeIsDownAndRecovers(t *testing.T) {
	lister := &fakeLister{}
	r := newRelister(t, lister, kubecontainer.EmitterFunc(func(context.Context, schemas.LifecycleEvent) {}), Config{Node: "n1", Period: time.Hour, Logger: zerolog.Nop()})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	// A worker asking for a view newer than now gets the runtime's error, not a hang.
	if _, err := r.Status(ctx, "u1", time.Now()); !errors.Is(err, errRuntimeDown) {
		t.Fatalf("Status with the runtime down: %v, want %v", err, errRuntimeDown)
	}

	lister.mu.Lock()
	lister.up = true
	lister.pods = []*kubecontainer.RuntimePod{{UID: "u1", Name: "web", Namespace: "default",
		Containers: []*kubecontainer.Container{{ID: "c1", State: kubecontainer.ContainerRunning}}}}
	lister.mu.Unlock()
	st, err := r.Status(ctx, "u1", time.Now())
	if err != nil || st == nil || st.UID != "u1" {
		t.Fatalf("Status after the runtime is back: %+v, %v", st, err)
	}
}

func TestStatusWaitersWakeWhenTheRelistStopsOrTheirContextEnds(t *testing.T) {
	lister := &fakeLister{up: true}
	r := newRelister(t, lister, kubecontainer.EmitterFunc(func(context.Context, schemas.LifecycleEvent) {}), Config{Node: "n1", Period: time.Hour, Logger: zerolog.Nop()})

	// Nothing relists: a waiter returns when its own context ends.
	waitCtx, cancelWait := context.WithCancel(t.Context())
	errs := make(chan error, 1)
	go func() { _, err := r.Status(waitCtx, "u1", time.Now().Add(time.Hour)); errs <- err }()
	cancelWait()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("Status after its context ended: %v", err)
	}

	// The relist stops (SIGTERM) while a sync waits for a view it cannot get.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	go func() { _, err := r.Status(t.Context(), "u1", time.Now().Add(time.Hour)); errs <- err }()
	cancel()
	<-done
	if err := <-errs; !errors.Is(err, errRelistStopped) {
		t.Fatalf("Status after the relist stopped: %v", err)
	}
}

// podsLister holds pods and their statuses; reading a status of a uid in
// failing fails.
type podsLister struct {
	pods     map[string]*kubecontainer.PodStatus
	failing  map[string]bool
	emitted  []schemas.LifecycleEvent
	relister *Relister
}

func (f *podsLister) GetPods(context.Context, bool) ([]*kubecontainer.RuntimePod, error) {
	var out []*kubecontainer.RuntimePod
	for uid, st := range f.pods {
		p := &kubecontainer.RuntimePod{UID: uid, Name: st.Name, Namespace: st.Namespace}
		for _, cs := range st.ContainerStatuses {
			p.Containers = append(p.Containers, &kubecontainer.Container{ID: cs.ID, State: cs.State})
		}
		out = append(out, p)
	}
	return out, nil
}

func (f *podsLister) GetPodStatus(_ context.Context, uid, _, _ string) (*kubecontainer.PodStatus, error) {
	if f.failing[uid] {
		return nil, errRuntimeDown
	}
	return f.pods[uid], nil
}

// relist runs one relist and returns the ids it emitted.
func (f *podsLister) relist(t *testing.T) []string {
	f.emitted = nil
	f.relister.relist(t.Context())
	var ids []string
	for _, ev := range f.emitted {
		ids = append(ids, ev.ID)
	}
	return ids
}

func TestEveryChangedPodHasItsFactsDerived(t *testing.T) {
	t0 := time.Now()
	running := func(id string) *kubecontainer.ContainerStatus {
		return &kubecontainer.ContainerStatus{ID: id, Name: "app", State: kubecontainer.ContainerRunning, CreatedAt: t0, StartedAt: t0}
	}
	f := &podsLister{
		pods: map[string]*kubecontainer.PodStatus{
			"u1": {UID: "u1", ContainerStatuses: []*kubecontainer.ContainerStatus{running("c1")}},
			"u2": {UID: "u2", ContainerStatuses: []*kubecontainer.ContainerStatus{running("c2")}},
		},
		failing: map[string]bool{"u2": true},
	}
	f.relister = newRelister(t, f, kubecontainer.EmitterFunc(func(_ context.Context, ev schemas.LifecycleEvent) { f.emitted = append(f.emitted, ev) }),
		Config{Node: "n1", Logger: zerolog.Nop()})

	if got := f.relist(t); !slices.Equal(got, []string{"c1.ContainerCreated", "c1.ContainerStarted"}) {
		t.Errorf("first relist emitted %v, want c1's facts (u2 could not be read)", got)
	}
	// u2 is read at last: its facts too; u1, unchanged, is not read again.
	delete(f.failing, "u2")
	if got := f.relist(t); !slices.Equal(got, []string{"c2.ContainerCreated", "c2.ContainerStarted"}) {
		t.Errorf("second relist emitted %v, want c2's facts", got)
	}
	// A change derives every fact of the pod again (the ledger stores only
	// the new one): a restart of jetlet between a fact and its event, or an
	// instance that started and died between two listings, leaves no gap.
	f.pods["u1"].ContainerStatuses[0].State = kubecontainer.ContainerExited
	f.pods["u1"].ContainerStatuses[0].FinishedAt = t0.Add(time.Second)
	if got := f.relist(t); !slices.Equal(got, []string{"c1.ContainerCreated", "c1.ContainerStarted", "c1.ContainerDied"}) {
		t.Errorf("after c1 exited the relist emitted %v, want all of c1's facts", got)
	}
}

// racingLister reports a pod's container exited, and on the first status
// read of a relist lets a pod worker store first what it read just before
// the exit, as the read-back after its sync does.
type racingLister struct {
	fakeLister
	r      *Relister
	raced  bool
	before *kubecontainer.PodStatus // what the worker read
}

func (f *racingLister) GetPodStatus(ctx context.Context, uid, name, ns string) (*kubecontainer.PodStatus, error) {
	if !f.raced {
		f.raced = true
		f.r.Store(uid, f.before, time.Now()) // began after the relist did
	}
	return &kubecontainer.PodStatus{UID: uid, Name: name, Namespace: ns, ContainerStatuses: []*kubecontainer.ContainerStatus{
		{ID: "c1", Name: "app", State: kubecontainer.ContainerExited},
	}}, nil
}

// A worker's read-back that began after a relist but read the runtime
// before it (a container exited in between) must not leave the exit
// unseen: the next relist reads the pod again.
func TestARelistBeatenByAStaleReadBackReadsThePodAgain(t *testing.T) {
	running := &kubecontainer.PodStatus{UID: "u1", Name: "web", Namespace: "default", ContainerStatuses: []*kubecontainer.ContainerStatus{
		{ID: "c1", Name: "app", State: kubecontainer.ContainerRunning},
	}}
	lister := &racingLister{fakeLister: fakeLister{up: true, pods: []*kubecontainer.RuntimePod{{UID: "u1", Name: "web", Namespace: "default",
		Containers: []*kubecontainer.Container{{ID: "c1", State: kubecontainer.ContainerExited}}}}}, before: running}
	r := newRelister(t, lister, kubecontainer.EmitterFunc(func(context.Context, schemas.LifecycleEvent) {}), Config{Node: "n1", Period: time.Hour, Logger: zerolog.Nop()})
	lister.r = r
	ctx := t.Context()
	r.relist(ctx) // the worker's stale entry wins this one
	r.relist(ctx)
	st, err := r.Status(ctx, "u1", time.Time{})
	if err != nil || st == nil || st.ContainerStatuses[0].State != kubecontainer.ContainerExited {
		t.Fatalf("the pod's cached status after two relists: %+v, %v; want its container exited", st, err)
	}
}

// readBackLister counts the status reads of each relist, and on the first
// lets a pod worker store first what it read (as the read-back after its
// sync does): the same states the list shows.
type readBackLister struct {
	fakeLister
	r     *Relister
	reads int
	now   *kubecontainer.PodStatus
}

func (f *readBackLister) GetPodStatus(_ context.Context, uid, _, _ string) (*kubecontainer.PodStatus, error) {
	f.reads++
	if f.reads == 1 {
		f.r.Store(uid, f.now, time.Now()) // began after the relist did
	}
	return f.now, nil
}

// A worker's read-back that beat a relist but shows what the relist listed
// is up to date: the next relist does not read the pod again.
func TestARelistBeatenByAnUpToDateReadBackReadsThePodOnce(t *testing.T) {
	now := &kubecontainer.PodStatus{UID: "u1", Name: "web", Namespace: "default",
		SandboxStatuses:   []*runtimeapi.PodSandboxStatus{{Id: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY}},
		ContainerStatuses: []*kubecontainer.ContainerStatus{{ID: "c1", Name: "app", State: kubecontainer.ContainerRunning}}}
	lister := &readBackLister{fakeLister: fakeLister{up: true, pods: []*kubecontainer.RuntimePod{{UID: "u1", Name: "web", Namespace: "default",
		Sandboxes:  []*kubecontainer.Container{{ID: "s1", State: kubecontainer.ContainerRunning}},
		Containers: []*kubecontainer.Container{{ID: "c1", State: kubecontainer.ContainerRunning}}}}}, now: now}
	r := newRelister(t, lister, kubecontainer.EmitterFunc(func(context.Context, schemas.LifecycleEvent) {}), Config{Node: "n1", Period: time.Hour, Logger: zerolog.Nop()})
	lister.r = r
	r.relist(t.Context())
	r.relist(t.Context())
	if lister.reads != 1 {
		t.Errorf("the pod's status read %d times by two relists, want once", lister.reads)
	}
}
