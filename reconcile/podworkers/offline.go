package podworkers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// StartOffline is Start from the node's checkpoint while the intents stream
// cannot be read: desired is each pod's applied intent as the node kept it.
// Its pods are started or adopted and synced as after Start (restart
// policies, back-off, probes, garbage collection), but the runtime's pods it
// does not name are left unclaimed: neither synced nor collected, since the stream
// may still want them. The stored statuses are not read. Resume hands over
// the stream's desired state once it can be read.
func (w *Workers) StartOffline(ctx context.Context, desired []Desired) error {
	return w.start(ctx, desired, true)
}

// Resume takes the complete desired state recovered from the intents stream
// after StartOffline: the stream is the truth, the checkpoint only bridged
// the gap. Every pod whose desired state is not the stream's is synced to
// it as an applied intent is (a pod new to the node admitted first), and
// the pods the stream does not want (a checkpoint's pod whose intents the
// stream no longer keeps, an unclaimed pod) are deleted as orphans. It returns
// once each of those syncs is done, or ctx is.
func (w *Workers) Resume(ctx context.Context, desired []Desired) error {
	running, err := w.mgr.GetPods(ctx, true)
	if err != nil {
		return fmt.Errorf("list the runtime's pods: %w", err)
	}
	wants := map[string]bool{}
	var changed []Desired
	w.mu.Lock()
	for _, d := range desired {
		wants[d.UID] = true
		if w.unclaimed[d.UID] != nil {
			w.podLocked(d.UID).admitted = true // it ran: admitted as it is
		}
		if p, ok := w.pods[d.UID]; !ok || p.orphan || p.desired == nil || p.desired.IntentSeq != d.IntentSeq {
			changed = append(changed, d)
		}
	}
	// What the runtime runs, and what the checkpoint wanted, that the
	// stream does not want.
	orphanOf := map[string]*kubecontainer.RuntimePod{}
	for _, rp := range running {
		if p, ok := w.pods[rp.UID]; !wants[rp.UID] && (!ok || !p.orphan) {
			orphanOf[rp.UID] = rp
		}
	}
	for uid, p := range w.pods {
		if !wants[uid] && !p.orphan && p.desired != nil && p.desired.Intent.Op == schemas.OpApply && orphanOf[uid] == nil {
			meta := p.desired.Intent.Pod.ObjectMeta
			orphanOf[uid] = &kubecontainer.RuntimePod{UID: uid, Name: meta.Name, Namespace: meta.Namespace}
		}
	}
	orphans := slices.Collect(maps.Values(orphanOf))
	clear(w.unclaimed)
	w.mu.Unlock()

	for _, rp := range orphans {
		w.mu.Lock()
		p := w.podLocked(rp.UID)
		w.mu.Unlock()
		p.sync.Lock()
		w.mu.Lock()
		w.orphanLocked(rp)
		w.holdLocked(p)
		w.mu.Unlock()
		p.sync.Unlock()
		w.wake(rp.UID)
	}
	// As the consumer's workers would apply them: a pod at a time each,
	// up to Workers at once.
	sem := make(chan struct{}, w.cfg.Workers)
	var syncs sync.WaitGroup
	for _, d := range changed {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			syncs.Wait()
			return ctx.Err()
		}
		syncs.Go(func() {
			defer func() { <-sem }()
			w.Sync(ctx, d)
		})
	}
	syncs.Wait()
	w.log.Info().Int("resynced", len(changed)).Int("orphaned", len(orphans)).Msg("desired state of the intents stream taken over from the checkpoint")
	return ctx.Err()
}
