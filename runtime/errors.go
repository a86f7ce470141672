package runtime

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors returned by the Client. Every error a Client method returns
// for a failed CRI call wraps exactly one of the code sentinels below, so
// callers test with errors.Is and never see a gRPC status.
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

// Errors the Client produces itself, before or instead of a CRI call.
var (
	// ErrInvalidConfig wraps every Config.Validate failure.
	ErrInvalidConfig = errors.New("invalid cri client config")
	// ErrNotConnected: a method was called before Connect succeeded, or after Close.
	ErrNotConnected = errors.New("cri client not connected")
	// ErrUnsupportedVersion: the runtime does not speak CRI v1.
	ErrUnsupportedVersion = errors.New("unsupported CRI runtime API version")
)

var codeSentinels = map[codes.Code]error{
	codes.NotFound:           ErrNotFound,
	codes.Unavailable:        ErrUnavailable,
	codes.DeadlineExceeded:   ErrDeadlineExceeded,
	codes.Canceled:           ErrCanceled,
	codes.InvalidArgument:    ErrInvalidArgument,
	codes.AlreadyExists:      ErrAlreadyExists,
	codes.FailedPrecondition: ErrFailedPrecondition,
	codes.Unimplemented:      ErrUnimplemented,
	codes.ResourceExhausted:  ErrResourceExhausted,
	codes.Aborted:            ErrAborted,
	codes.PermissionDenied:   ErrPermissionDenied,
	codes.Unauthenticated:    ErrPermissionDenied,
}

// convertError turns an error from a generated CRI stub into one wrapping a
// sentinel. The gRPC status itself is not kept in the chain: nothing above
// this package should be able to reach it.
func convertError(endpoint, method string, err error) error {
	if err == nil {
		return nil
	}
	var code codes.Code
	var msg string
	if st, ok := status.FromError(err); ok {
		code, msg = st.Code(), st.Message()
	} else {
		// Not a status: a context error surfacing directly, or something odd.
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			code = codes.DeadlineExceeded
		case errors.Is(err, context.Canceled):
			code = codes.Canceled
		default:
			code = codes.Unknown
		}
		msg = err.Error()
	}
	sentinel, ok := codeSentinels[code]
	if !ok {
		sentinel = ErrInternal
	}
	if sentinel == ErrUnavailable {
		// Say where we tried: the usual cause is a runtime that is not
		// running (yet) or is restarting.
		return fmt.Errorf("%w: cri %s at %s: %s", sentinel, method, endpoint, msg)
	}
	return fmt.Errorf("%w: cri %s: %s", sentinel, method, msg)
}

// IsRetryable reports whether err is transient: the same call may succeed
// later without any change on the caller's side (runtime unavailable or
// restarting, deadline exceeded, resource exhausted, aborted). A mutation
// that failed with a retryable error may or may not have been applied; the
// caller must re-read state before repeating it.
func IsRetryable(err error) bool {
	return errors.Is(err, ErrUnavailable) ||
		errors.Is(err, ErrDeadlineExceeded) ||
		errors.Is(err, ErrResourceExhausted) ||
		errors.Is(err, ErrAborted)
}
