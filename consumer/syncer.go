package consumer

import (
	"context"
	"time"

	"github.com/jetlet/jetlet/schemas"
)

// Desired is the state a pod worker drives its pod to: the last intent
// applied for the pod.
type Desired struct {
	UID string
	// Intent is an apply or a delete; a delete's pod has only its metadata.
	Intent     *schemas.PodIntent
	IntentSeq  uint64
	ReceivedAt time.Time
}

// Report is what one sync did and found.
type Report struct {
	Actions []schemas.ActionResult
	// Err is set when an action failed: the result is Failed and the pod is
	// synced again after RetryAfter.
	Err    error
	Status *schemas.PodStatus
	// RetryAfter asks for another sync after this long even if nothing changes
	// (a back-off running out, a failed action); 0 waits for a change.
	RetryAfter time.Duration
	// Gone: a delete has finished and nothing of the pod is left on the node.
	Gone bool
}

// PodRef names a pod found in the runtime.
type PodRef struct {
	UID, Namespace, Name string
}

// Syncer drives the node's runtime; the pod workers call it, one call per pod
// at a time.
type Syncer interface {
	// Sync converges the pod to want and reports what it did.
	Sync(ctx context.Context, want Desired) Report
	// RunningPods lists the pods the runtime holds, so that the ones no
	// intent wants can be killed at start-up.
	RunningPods(ctx context.Context) ([]PodRef, error)
}

// Publisher stores what the consumer tells the world.
type Publisher interface {
	PublishResult(ctx context.Context, r *schemas.SyncResult) error
	LastResultSeq(ctx context.Context, uid string) (uint64, error)
	Emit(ctx context.Context, ev schemas.LifecycleEvent)
	PutStatus(st *schemas.PodStatus)
}
