package prober

import (
	"sync"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
)

// Results is the latest result of one kind of probe per container instance,
// after kubelet's prober/results manager. It implements kubecontainer.ProbeResults.
// Each entry belongs to the worker that claimed it last: a stopped worker
// that is still finishing a probe cannot overwrite or remove the entry of
// the worker that replaced it.
type Results struct {
	mu sync.Mutex
	m  map[string]resultEntry // by container id; guarded by mu
}

type resultEntry struct {
	result kubecontainer.ProbeResult
	owner  *worker
}

func newResults() *Results { return &Results{m: map[string]resultEntry{}} }

// Get implements kubecontainer.ProbeResults.
func (r *Results) Get(containerID string) (kubecontainer.ProbeResult, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[containerID]
	return e.result, ok
}

// claim makes w the owner of its instance's entry, with result res.
func (r *Results) claim(w *worker, res kubecontainer.ProbeResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[w.containerID] = resultEntry{res, w}
}

// set stores w's result and reports whether it changed; a worker that no
// longer owns the entry changes nothing.
func (r *Results) set(w *worker, res kubecontainer.ProbeResult) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[w.containerID]
	if !ok || e.owner != w || e.result == res {
		return false
	}
	r.m[w.containerID] = resultEntry{res, w}
	return true
}

// release drops w's entry, if it still owns it.
func (r *Results) release(w *worker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[w.containerID]; ok && e.owner == w {
		delete(r.m, w.containerID)
	}
}

// len is how many instances have a result (tests: nothing is left behind).
func (r *Results) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
