package embedded

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// The runtime's CRI calls return Go errors: an error of one of the CRI's
// kinds is made by errorf with one of runtime/crierr's sentinels (the
// vocabulary the CRI client maps gRPC codes back to), any other error is
// Unknown. They become gRPC status errors in one place, toGRPC, which the
// server's interceptors apply, as containerd's CRI server converts its
// errdefs errors at its instrumented service.

// kindError is an error of one CRI kind with the message its caller wrote.
type kindError struct {
	kind error // one of crierr's sentinels
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// errorf is an error of kind (a runtime/crierr sentinel) saying
// fmt.Errorf(format, args...).
func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, err: fmt.Errorf(format, args...)}
}

// errUnknown is the kind of an error the CRI's client sees as Unknown even
// when it wraps a context's end (a registry's timeout is not the call's).
var errUnknown = errors.New("unknown")

// grpcCodes are the codes of crierr's kinds: the inverse of the CRI client's
// mapping (runtime/errors.go).
var grpcCodes = map[error]codes.Code{
	crierr.ErrNotFound:           codes.NotFound,
	crierr.ErrUnavailable:        codes.Unavailable,
	crierr.ErrDeadlineExceeded:   codes.DeadlineExceeded,
	crierr.ErrCanceled:           codes.Canceled,
	crierr.ErrInvalidArgument:    codes.InvalidArgument,
	crierr.ErrAlreadyExists:      codes.AlreadyExists,
	crierr.ErrFailedPrecondition: codes.FailedPrecondition,
	crierr.ErrUnimplemented:      codes.Unimplemented,
	crierr.ErrResourceExhausted:  codes.ResourceExhausted,
	crierr.ErrAborted:            codes.Aborted,
	crierr.ErrPermissionDenied:   codes.PermissionDenied,
	crierr.ErrInternal:           codes.Internal,
	errUnknown:                   codes.Unknown,
}

// toGRPC is err as the CRI's client receives it: a status error as it is,
// else the code of its kind (the outermost kindError's), else a context's end
// as DeadlineExceeded or Canceled, else Unknown, which is what gRPC makes of
// any other error.
func toGRPC(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err // a library's status (the streaming server's), as it said it
	}
	var ke *kindError
	if errors.As(err, &ke) {
		if code, ok := grpcCodes[ke.kind]; ok {
			return status.Error(code, err.Error())
		}
	}
	return status.FromContextError(err).Err()
}

// unaryStatus and streamStatus are the CRI server's boundary: every error a
// call returns leaves as toGRPC makes it.
func unaryStatus(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	return resp, toGRPC(err)
}

func streamStatus(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return toGRPC(handler(srv, ss))
}
