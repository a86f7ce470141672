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
