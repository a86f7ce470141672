// Package crierr holds the errors a CRI call fails with, one per kind of
// failure. It imports nothing, so that reconcile, which must not import gRPC,
// can recognise what the runtime client returns with errors.Is; the client
// (package runtime) wraps exactly one of them in every failed call's error.
package crierr

import "errors"

var (
	// ErrNotFound: the sandbox, container or image does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable: the runtime cannot be reached (not running, restarting,
	// socket missing). Retryable.
	ErrUnavailable = errors.New("runtime unavailable")
	// ErrDeadlineExceeded: the call did not finish within its timeout. Retryable.
	ErrDeadlineExceeded = errors.New("deadline exceeded")
	// ErrCanceled: the caller's context was canceled.
	ErrCanceled = errors.New("canceled")
	// ErrInvalidArgument: the runtime rejected the request as malformed.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrAlreadyExists: a sandbox or container with that name already exists.
	ErrAlreadyExists = errors.New("already exists")
	// ErrFailedPrecondition: the object is in the wrong state for the call
	// (for example starting a container that already ran).
	ErrFailedPrecondition = errors.New("failed precondition")
	// ErrUnimplemented: the runtime does not implement the call.
	ErrUnimplemented = errors.New("unimplemented")
	// ErrResourceExhausted: the runtime is out of some resource, or a message
	// exceeded the size limit. Retryable.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrAborted: the runtime aborted the call, typically on a conflict. Retryable.
	ErrAborted = errors.New("aborted")
	// ErrPermissionDenied: the runtime refused the caller (PermissionDenied or
	// Unauthenticated).
	ErrPermissionDenied = errors.New("permission denied")
	// ErrInternal: the runtime failed for a reason of its own (Internal,
	// Unknown, DataLoss, OutOfRange and any code not listed above).
	ErrInternal = errors.New("runtime internal error")
)
