package probe

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/jetlet/jetlet/runtime/probe/outcome"
)

// GRPC asks the standard health service (grpc.health.v1.Health/Check) at
// hostPort about service, over plaintext as kubelet does: SERVING is OK.
// The messages are kubelet's.
func (r *Runner) GRPC(ctx context.Context, hostPort, service string, timeout time.Duration) (outcome.Outcome, error) {
	conn, err := grpc.NewClient(hostPort,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(r.userAgent))
	if err != nil {
		return outcome.Outcome{Message: fmt.Sprintf("error: failed to connect service %q: %v", hostPort, err)}, nil
	}
	defer conn.Close()
	callCtx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(callCtx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		if ctx.Err() != nil {
			return outcome.Outcome{}, fmt.Errorf("grpc %s: %w", hostPort, ctx.Err())
		}
		switch status.Code(err) {
		case codes.Unimplemented:
			return outcome.Outcome{Message: fmt.Sprintf("this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", status.Convert(err).Message())}, nil
		case codes.DeadlineExceeded:
			return outcome.Outcome{Message: fmt.Sprintf("timeout: health rpc did not complete within %v", timeout)}, nil
		default:
			return outcome.Outcome{Message: fmt.Sprintf("error: health rpc probe failed: %v", err)}, nil
		}
	}
	if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return outcome.Outcome{Message: fmt.Sprintf("service unhealthy (responded with %q)", st)}, nil
	}
	return outcome.Outcome{OK: true}, nil
}
