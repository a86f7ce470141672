package podcgroups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// memBackend holds the cgroups in memory, with the writes made.
type memBackend struct {
	mu     sync.Mutex
	groups map[string]Resources // by Cgroupfs path
	writes int
	fail   error
}

func (b *memBackend) ensure(_ context.Context, n Name, res Resources) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return b.fail
	}
	b.groups[n.Cgroupfs()] = res
	b.writes++
	return nil
}

func (b *memBackend) remove(_ context.Context, n Name) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.groups, n.Cgroupfs())
	return nil
}

func (b *memBackend) pods(context.Context) ([]Name, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []Name
	for p := range b.groups {
		n := Name(strings.Split(strings.TrimPrefix(p, "/"), "/"))
		if _, ok := n.podUID(); ok {
			out = append(out, n)
		}
	}
	return out, nil
}

func (b *memBackend) close() {}

func (b *memBackend) shares(path string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return *b.groups[path].CPUShares
}

func burstablePod(uid, cpu string) *corev1.Pod {
	p := pod(corev1.ResourceRequirements{Requests: list("cpu", cpu)})
	p.UID = types.UID(uid)
	return p
}

func newTestManager(t *testing.T) (*Manager, *memBackend) {
	m, err := New(Config{Driver: Cgroupfs, PodPidsLimit: 100, Allocatable: list("cpu", "2", "memory", "1Gi")})
	if err != nil {
		t.Fatal(err)
	}
	b := &memBackend{groups: map[string]Resources{}}
	m.b = b
	ctx := context.Background()
	if err := m.b.ensure(ctx, kubepods, kubepodsResources(m.cfg.Allocatable)); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.updateBurstable(ctx); err != nil {
		t.Fatal(err)
	}
	return m, b
}

// The burstable level's shares follow its pods' requests, as kubelet's QoS
// manager; a pod's cgroup gets the pods pids limit; the same Ensure again
// writes nothing; a gone pod's cgroup is removed and its share given back.
func TestManagerKeepsTheBurstableSharesAndRemovesGonePods(t *testing.T) {
	m, b := newTestManager(t)
	ctx := context.Background()
	if got := b.shares("/kubepods/burstable"); got != 2 {
		t.Fatalf("burstable shares with no pods = %d, want 2", got)
	}
	a, c := burstablePod("a", "500m"), burstablePod("c", "250m")
	for _, p := range []*corev1.Pod{a, c} {
		if err := m.Ensure(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.shares("/kubepods/burstable"); got != 768 {
		t.Errorf("burstable shares of 750m = %d, want 768", got)
	}
	if got := b.groups["/kubepods/burstable/poda"].PidsLimit; got == nil || *got != 100 {
		t.Errorf("pod a's pids limit %v, want 100", got)
	}
	writes := b.writes
	if err := m.Ensure(ctx, a); err != nil || b.writes != writes {
		t.Errorf("the same Ensure again: %v, %d writes, want none", err, b.writes-writes)
	}
	if err := m.RemoveGone(ctx, func(uid string) bool { return uid == "a" }); err != nil {
		t.Fatal(err)
	}
	var left []string
	for p := range b.groups {
		left = append(left, p)
	}
	slices.Sort(left)
	if want := []string{"/kubepods", "/kubepods/burstable", "/kubepods/burstable/podc"}; !slices.Equal(left, want) {
		t.Errorf("cgroups left %v, want %v", left, want)
	}
	if got := b.shares("/kubepods/burstable"); got != 256 {
		t.Errorf("burstable shares after a went = %d, want 256", got)
	}
}

// A failed Ensure is tried again by the next, not taken as done.
func TestManagerRetriesAFailedEnsure(t *testing.T) {
	m, b := newTestManager(t)
	ctx := context.Background()
	b.fail = errors.New("no space left on device")
	p := burstablePod("a", "100m")
	if err := m.Ensure(ctx, p); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("Ensure: %v, want the backend's failure", err)
	}
	b.fail = nil
	if err := m.Ensure(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.groups["/kubepods/burstable/poda"]; !ok {
		t.Error("the pod's cgroup was not made on the second Ensure")
	}
}

func TestNewRefusesABadConfig(t *testing.T) {
	for _, cfg := range []Config{{Driver: "systemdd"}, {Driver: Cgroupfs, PodPidsLimit: -2}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v): no error", cfg)
		}
	}
}

// The pod workers ensure pods' cgroups at once: the burstable level ends
// with every pod's share.
func TestManagerEnsuresConcurrently(t *testing.T) {
	m, b := newTestManager(t)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := m.Ensure(context.Background(), burstablePod(fmt.Sprint("p", i), "125m")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := b.shares("/kubepods/burstable"); got != 1024 {
		t.Errorf("burstable shares of 8 pods of 125m = %d, want 1024", got)
	}
}
