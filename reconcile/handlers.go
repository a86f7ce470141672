package reconcile

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// HandlerOutcome is what running a probe's or a hook's handler found.
type HandlerOutcome struct {
	// OK: the command exited 0, the HTTP status was 2xx or 3xx, the TCP
	// connection opened, the gRPC health service answered SERVING.
	OK bool
	// Message says why not, for Unhealthy and FailedPostStartHook events
	// (the command's output, the HTTP status, the dial error).
	Message string
}

// HandlerRunner runs the handlers of probes and lifecycle hooks against a
// running container, as kubelet's prober and lifecycle handler runner do. Its
// arguments are resolved already (a named port is a number, an empty host is
// the pod's IP). An error is a handler that could not be run at all
// (the container is gone, the context ended); a handler that ran and failed
// is an outcome that is not OK. The implementation lives outside reconcile
// (runtime/probe), since the gRPC health check needs a gRPC client.
type HandlerRunner interface {
	Exec(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (HandlerOutcome, error)
	HTTPGet(ctx context.Context, u *url.URL, header http.Header, timeout time.Duration) (HandlerOutcome, error)
	TCPSocket(ctx context.Context, hostPort string, timeout time.Duration) (HandlerOutcome, error)
	GRPC(ctx context.Context, hostPort, service string, timeout time.Duration) (HandlerOutcome, error)
}
