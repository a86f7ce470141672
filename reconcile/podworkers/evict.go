package podworkers

import (
	"context"
	"fmt"

	"github.com/jetlet/jetlet/schemas"
)

// eviction is what the eviction manager asked of a pod: ended for good, its
// containers killed with grace, its phase Failed with reason and message.
type eviction struct {
	reason, message string
	grace           int64
}

// Evict ends the pod uid to relieve node pressure (the eviction manager's
// Killer), as kubelet's eviction manager kills a pod: its containers are
// killed with grace (seconds), its status is phase Failed with reason and
// message for good, and nothing of it restarts until a new intent replaces
// it. It returns once the pod is killed.
func (w *Workers) Evict(ctx context.Context, uid string, grace int64, reason, message string) error {
	w.mu.Lock()
	p, ok := w.pods[uid]
	w.mu.Unlock()
	if !ok {
		return fmt.Errorf("evict pod %s: not on this node", uid)
	}
	p.sync.Lock()
	defer p.sync.Unlock()
	if p.desired == nil || p.desired.Intent.Op != schemas.OpApply {
		return fmt.Errorf("evict pod %s: it is not running here (refused or being deleted)", uid)
	}
	w.log.Warn().Str("uid", uid).Str("pod", p.desired.Intent.Pod.Namespace+"/"+p.desired.Intent.Pod.Name).
		Int64("grace_seconds", grace).Str("message", message).Msg("evicting a pod to relieve node pressure")
	p.evicted = &eviction{reason: reason, message: message, grace: grace}
	return w.syncLocked(ctx, p).Err
}

// DeleteAllUnusedContainers collects, now, the dead containers and sandboxes
// the garbage collection policy lets go and the content of the pods no
// longer wanted: the eviction manager's reclaim before it evicts a pod.
func (w *Workers) DeleteAllUnusedContainers(ctx context.Context) error {
	return w.gc(ctx, func(uid string) bool { return !w.wanted(uid) })
}
