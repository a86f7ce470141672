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
	// ResultsStored returns the intent sequences answered by the results
	// stored for pod uid ("" for every pod) at or after since.
	ResultsStored(ctx context.Context, uid string, since time.Time) (map[uint64]bool, error)
}

// EventEmitter stores the lifecycle events the consumer emits itself (events
// on a real node).
type EventEmitter interface {
	Emit(ctx context.Context, ev schemas.LifecycleEvent)
}
