package eviction

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// fakeNode is an in-memory node for the manager's tests: what it observes,
// the garbage its collectors can free, its active pods and what evicting
// each frees. It plays every role the manager needs, and its state (signals,
// pods, evictions) is what the tests check. Safe for concurrent use.
type fakeNode struct {
	mu               sync.Mutex
	signals          map[Signal]Observation
	dedicatedImageFs bool
	splitContainerFs bool
	usage            map[string]PodUsage
	pods             []*corev1.Pod
	// garbage is what image garbage collection frees, deadContainers what
	// container garbage collection frees, added to these signals' available.
	garbage        map[Signal]int64
	deadContainers map[Signal]int64
	evicted        []eviction
	observed       int // Observe calls, so that Run's test sees each synchronize
}

// eviction is one Evict the node received.
type eviction struct {
	uid     string
	grace   int64
	reason  string
	message string
}

func newFakeNode() *fakeNode {
	return &fakeNode{signals: map[Signal]Observation{}, usage: map[string]PodUsage{}, garbage: map[Signal]int64{}, deadContainers: map[Signal]int64{}}
}

// set makes signal's available amount available (bytes or a count) of capacity.
func (n *fakeNode) set(signal Signal, available, capacity int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	format := resource.BinarySI
	if signalResource[signal] == resourceInodes || signalResource[signal] == resourcePIDs {
		format = resource.DecimalSI
	}
	n.signals[signal] = Observation{Available: *resource.NewQuantity(available, format), Capacity: *resource.NewQuantity(capacity, format)}
}

func (n *fakeNode) available(signal Signal) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	o := n.signals[signal]
	return o.Available.Value()
}

func (n *fakeNode) free(signal Signal, amount int64) {
	o := n.signals[signal]
	o.Available.Add(*resource.NewQuantity(amount, o.Available.Format))
	n.signals[signal] = o
}

// addPod makes pod active, using usage.
func (n *fakeNode) addPod(pod *corev1.Pod, usage PodUsage) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pods = append(n.pods, pod)
	n.usage[string(pod.UID)] = usage
}

func (n *fakeNode) evictions() []eviction {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.evicted)
}

func (n *fakeNode) evictedUIDs() []string {
	var uids []string
	for _, e := range n.evictions() {
		uids = append(uids, e.uid)
	}
	return uids
}

func (n *fakeNode) Observe(context.Context) (Observations, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.observed++
	signals := make(map[Signal]Observation, len(n.signals))
	for s, o := range n.signals {
		signals[s] = Observation{Available: o.Available.DeepCopy(), Capacity: o.Capacity.DeepCopy()}
	}
	return Observations{Signals: signals, DedicatedImageFs: n.dedicatedImageFs, SplitContainerFs: n.splitContainerFs}, nil
}

func (n *fakeNode) PodUsage(context.Context) (map[string]PodUsage, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	usage := make(map[string]PodUsage, len(n.usage))
	for uid, u := range n.usage {
		usage[uid] = u
	}
	return usage, nil
}

// DeleteAllUnusedContainers frees what the dead containers take.
func (n *fakeNode) DeleteAllUnusedContainers(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.freeAll(n.deadContainers)
	return nil
}

// DeleteUnusedImages frees all the garbage.
func (n *fakeNode) DeleteUnusedImages(context.Context) (int64, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.freeAll(n.garbage), nil
}

// uncollected is the garbage and dead containers not collected yet.
func (n *fakeNode) uncollected() (total int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range []map[Signal]int64{n.garbage, n.deadContainers} {
		for _, amount := range m {
			total += amount
		}
	}
	return total
}

func (n *fakeNode) freeAll(what map[Signal]int64) (freed int64) {
	for s, amount := range what {
		n.free(s, amount)
		freed += amount
	}
	clear(what)
	return freed
}

func (n *fakeNode) ActivePods() []*corev1.Pod {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.pods)
}

// Evict records the eviction, and the pod goes, freeing its memory and its
// disk on one file system.
func (n *fakeNode) Evict(_ context.Context, uid string, grace int64, reason, message string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.evicted = append(n.evicted, eviction{uid, grace, reason, message})
	n.pods = slices.DeleteFunc(n.pods, func(p *corev1.Pod) bool { return string(p.UID) == uid })
	u := n.usage[uid]
	delete(n.usage, uid)
	n.free(SignalMemoryAvailable, u.MemoryWorkingSet)
	n.free(SignalNodeFsAvailable, signalUsage(SignalNodeFsAvailable, u, false, false))
	return nil
}
