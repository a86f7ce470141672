package consumer

import (
	"context"
	"time"

	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/schemas"
)

// Syncer drives the node's pods (podworkers.Workers on a real node).
type Syncer interface {
	// Start takes the complete desired state recovered from the stream,
	// before any Sync.
	Start(ctx context.Context, desired []podworkers.Desired) error
	// Sync applies want, an intent accepted for its pod, and reports what it
	// did. The consumer calls it for one pod at a time, in intent order.
	Sync(ctx context.Context, want podworkers.Desired) podworkers.Report
}

// OfflineSyncer is a Syncer that can run the node's pods from its
// checkpoint while the intents stream cannot be read (podworkers.Workers).
type OfflineSyncer interface {
	Syncer
	// StartOffline takes the checkpoint's desired state instead of Start;
	// the runtime's pods it does not name are left as they are.
	StartOffline(ctx context.Context, desired []podworkers.Desired) error
	// Resume takes the complete desired state recovered from the stream
	// after StartOffline, before any Sync.
	Resume(ctx context.Context, desired []podworkers.Desired) error
}

// Checkpoint keeps each pod's applied intent on the node
// (consumer/checkpoint on a real node).
type Checkpoint interface {
	Load() ([]podworkers.Desired, error)
	// Record keeps d as its pod's applied intent.
	Record(d podworkers.Desired) error
	// Forget drops pod uid's.
	Forget(uid string) error
	// Replace keeps desired and nothing else.
	Replace(desired []podworkers.Desired) error
}

// ResultStore stores the answer of each intent and says which are answered
// (consumer/results on a real node).
type ResultStore interface {
	PublishResult(ctx context.Context, r *schemas.SyncResult) error
	// PodAnswered returns the intents of pod uid whose result is stored.
	PodAnswered(ctx context.Context, uid string) (map[uint64]bool, error)
	// AnsweredSince returns the intents of every pod answered by a result
	// stored at or after since.
	AnsweredSince(ctx context.Context, since time.Time) (map[uint64]bool, error)
	// Forget drops what is remembered of pod uid's results: the pod is
	// gone from the node's memory.
	Forget(uid string)
}

// EventEmitter stores the lifecycle events the consumer emits itself (events
// on a real node).
type EventEmitter interface {
	Emit(ctx context.Context, ev schemas.LifecycleEvent)
}
