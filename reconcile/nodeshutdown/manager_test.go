package nodeshutdown

import (
	"context"
	"io"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// fakeLogind is an in-memory logind for the manager's timing; the real one
// over D-Bus is internal/logind's, tested with a private bus.
type fakeLogind struct {
	mu      sync.Mutex
	delay   time.Duration
	locks   int // held now
	taken   int // in all
	log     *[]string
	signals chan bool
}

func (f *fakeLogind) InhibitDelayMax() (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay, nil
}

func (f *fakeLogind) RaiseInhibitDelayMax(_ context.Context, d time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
	return nil
}

func (f *fakeLogind) InhibitShutdown() (io.Closer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.locks++
	f.taken++
	return closerFunc(func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.locks--
		*f.log = append(*f.log, "release")
		return nil
	}), nil
}

func (f *fakeLogind) PrepareForShutdown() (<-chan bool, error) { return f.signals, nil }
func (f *fakeLogind) Close() error                             { return nil }

func (f *fakeLogind) held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.locks
}

type closerFunc func() error

func (c closerFunc) Close() error { return c() }

// fakePods are pods that take their own time to stop (takes, by name).
type fakePods struct {
	mu    sync.Mutex
	pods  []*corev1.Pod
	takes map[string]time.Duration
	log   *[]string
	start time.Time
	grace map[string]int64
}

func (f *fakePods) ActivePods() []*corev1.Pod { return f.pods }

func (f *fakePods) EndForShutdown(ctx context.Context, uid string, grace int64, reason, message string) error {
	if reason != Reason || message != Message {
		panic("wrong reason or message: " + reason + ", " + message)
	}
	f.note("stop " + uid)
	f.mu.Lock()
	f.grace[uid] = grace
	f.mu.Unlock()
	select {
	case <-time.After(f.takes[uid]): // the pod's preStop hook and exit, in the bubble's time
	case <-ctx.Done():
		return ctx.Err()
	}
	f.note("stopped " + uid)
	return nil
}

func (f *fakePods) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	*f.log = append(*f.log, time.Since(f.start).Round(time.Millisecond).String()+" "+s)
}

func pod(uid string, priority int32, grace int64) *corev1.Pod {
	p := podOf(uid, ptr.To(priority), ptr.To(grace))
	p.UID = types.UID(uid)
	return p
}

func TestShutdownStopsGroupsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log []string
		logind := &fakeLogind{delay: 5 * time.Second, log: &log, signals: make(chan bool, 1)}
		pods := &fakePods{
			pods: []*corev1.Pod{
				pod("critical", SystemCriticalPriority, 30), pod("web", 0, 5), pod("batch", 0, 300),
			},
			// batch outlives its group's 20 s; critical stops in 3 s of its 10.
			takes: map[string]time.Duration{"web": 2 * time.Second, "batch": time.Hour, "critical": 3 * time.Second},
			log:   &log, start: time.Now(), grace: map[string]int64{},
		}
		flush := func(ctx context.Context) error {
			pods.note("flush")
			return nil
		}
		m, err := New(func() (Logind, error) { return logind, nil }, pods, pods, flush,
			Config{GracePeriod: 30 * time.Second, GracePeriodCriticalPods: 10 * time.Second}, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- m.Run(ctx) }()
		synctest.Wait()
		if logind.held() != 1 {
			t.Fatalf("%d locks held after start, want 1", logind.held())
		}
		if want := 35 * time.Second; logind.delay != want {
			t.Fatalf("logind's delay %s, want it raised to %s (the grace period and the margin to publish)", logind.delay, want)
		}
		if _, down := m.ShuttingDown(); down {
			t.Fatal("shutting down before logind said so")
		}
		logind.signals <- true
		synctest.Wait()
		if _, down := m.ShuttingDown(); !down {
			t.Fatal("not shutting down once logind said so")
		}
		select {
		case <-m.Changed():
		default:
			t.Fatal("Changed did not signal")
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		want := []string{
			"0s stop batch", "0s stop web", "2s stopped web",
			"20s stop critical", "23s stopped critical", "23s flush", "release",
		}
		slices.Sort(want[:2])
		got := slices.Clone(log)
		slices.Sort(got[:2])
		if !slices.Equal(got, want) {
			t.Fatalf("shutdown:\n got %q\nwant %q", got, want)
		}
		if pods.grace["web"] != 5 || pods.grace["batch"] != 20 || pods.grace["critical"] != 10 {
			t.Fatalf("grace periods %v, want web 5 (its own), batch 20 (its group's), critical 10", pods.grace)
		}
		if logind.held() != 0 {
			t.Fatal("the lock is still held after the pods stopped")
		}
		// Cancelled: admitted again and the lock taken again.
		logind.signals <- false
		synctest.Wait()
		if _, down := m.ShuttingDown(); down || logind.held() != 1 || logind.taken != 2 {
			t.Fatalf("after a cancel: shutting down %v, %d locks held (%d taken); want no, 1 (2)", down, logind.held(), logind.taken)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if logind.held() != 0 {
			t.Fatal("the lock is still held after Run returned")
		}
	})
}

func TestShutdownSkipsEmptyGroups(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log []string
		logind := &fakeLogind{delay: time.Hour, log: &log, signals: make(chan bool, 1)}
		pods := &fakePods{
			pods:  []*corev1.Pod{pod("critical", SystemCriticalPriority+1000, 30)},
			takes: map[string]time.Duration{"critical": time.Second},
			log:   &log, start: time.Now(), grace: map[string]int64{},
		}
		m, err := New(func() (Logind, error) { return logind, nil }, pods, pods, func(context.Context) error { return nil },
			Config{ByPodPriority: []PriorityGrace{{0, 60}, {SystemCriticalPriority, 10}}}, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go m.Run(ctx)
		synctest.Wait()
		if logind.delay != time.Hour {
			t.Fatalf("logind's delay changed to %s; it was already long enough", logind.delay)
		}
		logind.signals <- true
		time.Sleep(time.Minute)
		synctest.Wait()
		// No wait for the empty group of priority 0.
		if want := []string{"0s stop critical", "1s stopped critical", "release"}; !slices.Equal(log, want) {
			t.Fatalf("shutdown: got %q, want %q", log, want)
		}
	})
}

func TestRunDisabledOrWithoutLogind(t *testing.T) {
	noLogind := func() (Logind, error) { return nil, io.ErrUnexpectedEOF }
	pods := &fakePods{}
	flush := func(context.Context) error { return nil }
	m, err := New(noLogind, pods, pods, flush, Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(t.Context()); err != nil {
		t.Fatalf("disabled: Run = %v, want nil without connecting", err)
	}
	m, err = New(noLogind, pods, pods, flush, Config{GracePeriod: time.Second}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(t.Context()); err == nil {
		t.Fatal("enabled without logind: Run = nil, want an error")
	}
	if _, err := New(noLogind, pods, pods, flush, Config{GracePeriod: time.Second, GracePeriodCriticalPods: time.Minute}, zerolog.Nop()); err == nil {
		t.Fatal("New accepted a critical period above the whole")
	}
}
