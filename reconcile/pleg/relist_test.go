package pleg

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/schemas"
)

// fakeLister is a runtime that is down until up is set, then holds pods.
type fakeLister struct {
	mu   sync.Mutex
	up   bool
	pods []*reconcile.RuntimePod
}

var errRuntimeDown = errors.New("runtime unavailable")

func (f *fakeLister) GetPods(context.Context, bool) ([]*reconcile.RuntimePod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.up {
		return nil, errRuntimeDown
	}
	return f.pods, nil
}

func (f *fakeLister) GetPodStatus(_ context.Context, uid, name, ns string) (*reconcile.PodStatus, error) {
	return &reconcile.PodStatus{UID: uid, Name: name, Namespace: ns}, nil
}

func TestStatusFailsWhileTheRuntimeIsDownAndRecovers(t *testing.T) {
	lister := &fakeLister{}
	r := New(lister, reconcile.EmitterFunc(func(context.Context, schemas.LifecycleEvent) {}), Config{Node: "n1", Period: time.Hour, Logger: zerolog.Nop()})
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
	lister.pods = []*reconcile.RuntimePod{{UID: "u1", Name: "web", Namespace: "default",
		Containers: []*reconcile.Container{{ID: "c1", State: reconcile.ContainerRunning}}}}
	lister.mu.Unlock()
	st, err := r.Status(ctx, "u1", time.Now())
	if err != nil || st == nil || st.UID != "u1" {
		t.Fatalf("Status after the runtime is back: %+v, %v", st, err)
	}
}

func TestStatusWaitersWakeWhenTheRelistStopsOrTheirContextEnds(t *testing.T) {
	lister := &fakeLister{up: true}
	r := New(lister, reconcile.EmitterFunc(func(context.Context, schemas.LifecycleEvent) {}), Config{Node: "n1", Period: time.Hour, Logger: zerolog.Nop()})

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
