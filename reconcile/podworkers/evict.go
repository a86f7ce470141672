package podworkers

import (
	"context"
	"fmt"

	"github.com/jetlet/jetlet/schemas"
)

// eviction is what the eviction manager or the node's shutdown asked of a
// pod: ended for good, its containers killed with grace, its phase Failed
// with reason and message.
type eviction struct {
	reason, message string
	grace           int64
	// shutdown: the node is going down; a new intent does not start the
	// pod again before jetlet restarts.
	shutdown bool
}

// Evict ends the pod uid to relieve node pressure (the eviction manager's
// Killer), as kubelet's eviction manager kills a pod: its containers are
// killed with grace (seconds), its status is phase Failed with reason and
// message for good, and nothing of it restarts until a new intent replaces
// it. It returns once the pod is killed.
func (w *Workers) Evict(ctx context.Context, uid string, grace int64, reason, message string) error {
	return w.end(ctx, uid, eviction{reason: reason, message: message, grace: grace}, "evicting a pod to relieve node pressure")
}

// EndForShutdown ends the pod uid for the node's shutdown (the node
// shutdown manager's Killer), as Evict does, as kubelet's
// TerminatePodAbnormallyAndWait: its preStop hooks run within grace, its
// status is phase Failed with reason and message; an intent coming while
// the node goes down does not start it again. It returns once the pod is
// killed.
func (w *Workers) EndForShutdown(ctx context.Context, uid string, grace int64, reason, message string) error {
	return w.end(ctx, uid, eviction{reason: reason, message: message, grace: grace, shutdown: true}, "stopping a pod for the node's shutdown")
}

func (w *Workers) end(ctx context.Context, uid string, e eviction, why string) error {
	w.mu.Lock()
	p, ok := w.pods[uid]
	w.mu.Unlock()
	if !ok {
		return fmt.Errorf("end pod %s: not on this node", uid)
	}
	p.sync.Lock()
	defer p.sync.Unlock()
	if p.desired == nil || p.desired.Intent.Op != schemas.OpApply {
		return fmt.Errorf("end pod %s: it is not running here (refused or being deleted)", uid)
	}
	w.log.Warn().Str("uid", uid).Str("pod", p.desired.Intent.Pod.Namespace+"/"+p.desired.Intent.Pod.Name).
		Int64("grace_seconds", e.grace).Str("reason", e.reason).Str("message", e.message).Msg(why)
	p.evicted = &e
	return w.syncLocked(ctx, p).Err
}

// DeleteAllUnusedContainers collects, now, the dead containers and sandboxes
// the garbage collection policy lets go and the content of the pods no
// longer wanted: the eviction manager's reclaim before it evicts a pod.
func (w *Workers) DeleteAllUnusedContainers(ctx context.Context) error {
	return w.gc(ctx, func(uid string) bool { return !w.wanted(uid) })
}
