package runtime

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// Sentinel errors returned by the Client. Every error a Client method returns
// for a failed CRI call wraps exactly one of the code sentinels below, so
// callers test with errors.Is and never see a gRPC status. They are crierr's
// (documented there), which callers that must not import this package use.
var (
	ErrNotFound           = crierr.ErrNotFound
	ErrUnavailable        = crierr.ErrUnavailable
	ErrDeadlineExceeded   = crierr.ErrDeadlineExceeded
	ErrCanceled           = crierr.ErrCanceled
	ErrInvalidArgument    = crierr.ErrInvalidArgument
	ErrAlreadyExists      = crierr.ErrAlreadyExists
	ErrFailedPrecondition = crierr.ErrFailedPrecondition
	ErrUnimplemented      = crierr.ErrUnimplemented
	ErrResourceExhausted  = crierr.ErrResourceExhausted
	ErrAborted            = crierr.ErrAborted
	ErrPermissionDenied   = crierr.ErrPermissionDenied
	ErrInternal           = crierr.ErrInternal
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
