package kubecontainer

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jetlet/jetlet/schemas"
)

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
	ErrPostStartHook         = errors.New("PostStartHookError")
	// ErrResize: an in-place resize failed (kubelet's ResizeError event and
	// the Error reason of its PodResizeInProgress condition).
	ErrResize = errors.New("ResizeError")
)

// PodSyncResult is the outcome of a SyncPod or KillPod: one result per action
// taken, in order.
type PodSyncResult struct {
	Actions []ActionResult
	// SyncError is an error that is no action's (reading the new sandbox's status).
	SyncError error
}

// ActionResult is one action taken: Action is one of the schemas.Action*
// names, Target the container's name (the pod's uid for sandbox actions).
type ActionResult struct {
	Action, Target string
	// Err is nil when the action succeeded, else the kubelet error it
	// failed with: one of the Err* sentinels above.
	Err error
	// Message is the human text: what failed, or what was made (an id, an
	// image).
	Message string
}

// ActionError is a failed action as an error; errors.Is finds its kubelet
// error.
type ActionError struct{ ActionResult }

func (e *ActionError) Error() string {
	return fmt.Sprintf("%s %q: %s: %s", e.Action, e.Target, e.Err, e.Message)
}

func (e *ActionError) Unwrap() error { return e.Err }

func (r *PodSyncResult) Add(action, target, message string) {
	r.Actions = append(r.Actions, ActionResult{Action: action, Target: target, Message: message})
}

func (r *PodSyncResult) Fail(action, target string, err error, message string) {
	r.Actions = append(r.Actions, ActionResult{Action: action, Target: target, Err: err, Message: message})
}

// ActionResults is the wire form of Actions, for a SyncResult: the error is
// the kubelet error's name. Never nil, so that no action is [] on the wire.
func (r PodSyncResult) ActionResults() []schemas.ActionResult {
	out := make([]schemas.ActionResult, len(r.Actions))
	for i, a := range r.Actions {
		out[i] = schemas.ActionResult{Action: a.Action, Target: a.Target, Message: a.Message}
		if a.Err != nil {
			out[i].Error = a.Err.Error()
		}
	}
	return out
}

// Error returns nil when every action succeeded, else a SyncErrors of the
// SyncError and an *ActionError per failed action; errors.Is finds each
// one's kubelet error in it.
func (r PodSyncResult) Error() error {
	var errs SyncErrors
	if r.SyncError != nil {
		errs = append(errs, r.SyncError)
	}
	for _, a := range r.Actions {
		if a.Err != nil {
			errs = append(errs, &ActionError{a})
		}
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
