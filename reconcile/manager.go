package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"

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

// Errors named in action results, kubelet's.
var (
	ErrCrashLoopBackOff      = errors.New("CrashLoopBackOff")
	ErrImagePull             = errors.New("ErrImagePull")
	ErrImagePullBackOff      = errors.New("ImagePullBackOff")
	ErrImageNeverPull        = errors.New("ErrImageNeverPull")
	ErrImageInspect          = errors.New("ImageInspectError")
	ErrCreateContainerConfig = errors.New("CreateContainerConfigError")
	ErrCreateContainer       = errors.New("CreateContainerError")
	ErrRunContainer          = errors.New("RunContainerError")
	ErrKillContainer         = errors.New("KillContainerError")
	ErrCreatePodSandbox      = errors.New("CreatePodSandboxError")
	ErrKillPodSandbox        = errors.New("KillPodSandboxError")
	ErrPodSandboxStatus      = errors.New("PodSandboxStatusError")
)

// PodSyncResult is the outcome of a SyncPod or KillPod: one result per action
// taken, in order.
type PodSyncResult struct {
	Actions []schemas.ActionResult
	// Failures are the failed actions of Actions, in order, each wrapping
	// its kubelet error (ErrCrashLoopBackOff, ...) for errors.Is.
	Failures []*ActionError
	// SyncError is an error that is no action's (reading the new sandbox's status).
	SyncError error
}

// ActionError is one failed action.
type ActionError struct {
	Action, Target string
	Err            error // one of the Err* sentinels above
	Message        string
}

func (e *ActionError) Error() string {
	return fmt.Sprintf("%s %q: %s: %s", e.Action, e.Target, e.Err, e.Message)
}

func (e *ActionError) Unwrap() error { return e.Err }

func (r *PodSyncResult) add(action, target string) *schemas.ActionResult {
	r.Actions = append(r.Actions, schemas.ActionResult{Action: action, Target: target})
	return &r.Actions[len(r.Actions)-1]
}

func (r *PodSyncResult) fail(action, target string, err error, msg string) {
	r.Actions = append(r.Actions, schemas.ActionResult{Action: action, Target: target, Error: err.Error(), Message: msg})
	r.Failures = append(r.Failures, &ActionError{Action: action, Target: target, Err: err, Message: msg})
}

// merge appends the actions of o.
func (r *PodSyncResult) merge(o PodSyncResult) {
	r.Actions = append(r.Actions, o.Actions...)
	r.Failures = append(r.Failures, o.Failures...)
}

// Error returns nil when every action succeeded, else a SyncErrors naming
// the failed actions; errors.Is finds each one's kubelet error in it.
func (r PodSyncResult) Error() error {
	var errs SyncErrors
	if r.SyncError != nil {
		errs = append(errs, r.SyncError)
	}
	for _, f := range r.Failures {
		errs = append(errs, f)
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

// SyncErrors are the errors of one sync, in order.
type SyncErrors []error

func (e SyncErrors) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return strings.Join(parts, "; ")
}

func (e SyncErrors) Unwrap() []error { return e }
