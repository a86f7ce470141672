package reconcile

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
)

// Emitter receives every lifecycle event reconcile produces. Emit must not
// block for long; it is called from the sync that produced the event. The
// event carries everything but IntentSeq and Revision, which the caller's
// Emitter may add from ctx.
type Emitter interface {
	Emit(ctx context.Context, ev schemas.LifecycleEvent)
}

// Flusher is an Emitter that can wait until every event it was given is
// stored. Garbage collection flushes the facts about what it is about to
// remove before removing it: once a container or sandbox is gone, nothing can
// derive its facts again (a crash between the removal and the publication
// would lose them).
type Flusher interface {
	Flush(ctx context.Context) error
}

// EmitterFunc adapts a function to Emitter.
type EmitterFunc func(ctx context.Context, ev schemas.LifecycleEvent)

// Emit implements Emitter.
func (f EmitterFunc) Emit(ctx context.Context, ev schemas.LifecycleEvent) { f(ctx, ev) }

// PodStateProvider tells garbage collection which pods are gone.
type PodStateProvider interface {
	// ShouldPodContentBeRemoved: the pod is no longer wanted on this node, so
	// its dead containers, sandboxes, logs and emptyDir volumes may go.
	ShouldPodContentBeRemoved(uid string) bool
}

// PodStateFunc adapts a function to PodStateProvider.
type PodStateFunc func(uid string) bool

// ShouldPodContentBeRemoved implements PodStateProvider.
func (f PodStateFunc) ShouldPodContentBeRemoved(uid string) bool { return f(uid) }

// Manager is jetlet's kuberuntime manager: it syncs pods to a Runtime. It is
// safe for concurrent use by several pod workers as long as each pod is synced
// by one worker at a time (as kubelet's pod workers guarantee).
type Manager struct {
	rt           Runtime
	emit         Emitter
	cfg          Config
	log          zerolog.Logger
	backOff      *Backoff
	imageBackOff *Backoff
	reasons      *reasonCache
	cache        *statusCache
}

// New returns a Manager. It does no I/O.
func New(rt Runtime, emit Emitter, cfg Config) (*Manager, error) {
	if rt == nil {
		return nil, fmt.Errorf("%w: nil Runtime", ErrInvalidConfig)
	}
	if emit == nil {
		return nil, fmt.Errorf("%w: nil Emitter", ErrInvalidConfig)
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Manager{
		rt:           rt,
		emit:         emit,
		cfg:          cfg,
		log:          cfg.Logger.With().Str("component", "reconcile").Logger(),
		backOff:      NewBackoff(cfg.Clock, cfg.BackOffInitial, cfg.BackOffMax, cfg.BackOffReset),
		imageBackOff: NewBackoff(cfg.Clock, cfg.ImageBackOffInitial, cfg.ImageBackOffMax, 0),
		reasons:      newReasonCache(),
		cache:        newStatusCache(),
	}, nil
}

// Config returns the manager's defaulted config.
func (m *Manager) Config() Config { return m.cfg }
