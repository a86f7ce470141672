package client

import (
	"errors"
	"fmt"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// Sentinel errors, matched with errors.Is, as nats.go's jetstream does. The
// errors that carry more are matched with errors.As: *RejectedError,
// *DeniedError.
var (
	// ErrNotFound: the pod, node, stream, bucket or object asked for does
	// not exist (or no longer does).
	ErrNotFound = errors.New("jetlet: not found")
	// ErrRejected: the node refused the intent (outcome Rejected); the
	// *RejectedError carries the result and its reason.
	ErrRejected = errors.New("jetlet: intent rejected")
	// ErrDenied: NATS refused these credentials a publish or a
	// subscription; the *DeniedError carries the permission.
	ErrDenied = errors.New("jetlet: permission denied")
	// ErrInvalid: an argument or an intent fails validation before
	// anything is sent.
	ErrInvalid = errors.New("jetlet: invalid")
	// ErrExecTimedOut: a command run with Exec outlived its timeout.
	ErrExecTimedOut = errors.New("jetlet: the command timed out")
)

// RejectedError is a SyncResult with outcome Rejected. errors.Is(err,
// ErrRejected) holds.
type RejectedError struct {
	Result *schemas.SyncResult
}

// Reason is kubelet's word for the refusal (OutOfmemory, NodeAffinity,
// NodeUnschedulable, ...), empty when validation refused the intent.
func (e *RejectedError) Reason() string { return e.Result.Reason }

func (e *RejectedError) Error() string {
	r := e.Result
	s := fmt.Sprintf("intent %d for pod %s/%s (uid %s) rejected by node %s", r.IntentSeq, r.Namespace, r.Name, r.UID, r.Node)
	if r.Reason != "" {
		s += " (" + r.Reason + ")"
	}
	if r.Error != "" {
		s += ": " + r.Error
	}
	return s
}

func (e *RejectedError) Is(target error) bool { return target == ErrRejected }

// DeniedError is NATS refusing these credentials the permission that a call
// needed. errors.Is(err, ErrDenied) holds, and errors.As finds the
// *natsjs.PermissionError it wraps.
type DeniedError struct {
	// What the call was doing ("publish pod/default/web", "stream
	// JETLET_EVENTS").
	What string
	// URL is the server's, passwords hidden.
	URL        string
	Permission *natsjs.PermissionError
	// Hint says whose credentials the call takes, if known.
	Hint string
}

func (e *DeniedError) Error() string {
	s := fmt.Sprintf("%s: NATS at %s denied these credentials: %v", e.What, e.URL, e.Permission)
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

func (e *DeniedError) Is(target error) bool { return target == ErrDenied }
func (e *DeniedError) Unwrap() error        { return e.Permission }

// kindError reads as msg and matches kind (one of the sentinels) and err,
// its cause, with errors.Is.
type kindError struct {
	kind, err error
	msg       string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() []error {
	if e.err == nil {
		return []error{e.kind}
	}
	return []error{e.kind, e.err}
}

// errorOf is an error of kind reading as the formatted message; cause, if
// not nil, stays matchable.
func errorOf(kind, cause error, format string, args ...any) error {
	return &kindError{kind: kind, err: cause, msg: fmt.Sprintf(format, args...)}
}
