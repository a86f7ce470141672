package probe_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/jetlet/jetlet/runtime/probe"
)

// blockingHealth answers Check only when its context ends.
type blockingHealth struct {
	healthpb.UnimplementedHealthServer
}

func (blockingHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// serve starts a gRPC server on a TCP port with register's services.
func serve(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func TestGRPC(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	withHealth := serve(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	without := serve(t, func(*grpc.Server) {})
	blocking := serve(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, blockingHealth{}) })

	r := probe.New(nil, probe.Config{})
	cases := []struct {
		name     string
		hostPort string
		service  string
		timeout  time.Duration
		ok       bool
		message  string
	}{
		{"the server's health", withHealth, "", 10 * time.Second, true, ""},
		{"a service not serving", withHealth, "db", 10 * time.Second, false, `service unhealthy (responded with "NOT_SERVING")`},
		{"an unknown service", withHealth, "nope", 10 * time.Second, false, "NotFound"},
		{"no health service", without, "", 10 * time.Second, false, "does not implement the grpc health protocol"},
		{"timeout", blocking, "", 100 * time.Millisecond, false, "health rpc did not complete within 100ms"},
		{"nothing listening", "127.0.0.1:1", "", 10 * time.Second, false, "health rpc probe failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.GRPC(t.Context(), tc.hostPort, tc.service, tc.timeout)
			if err != nil {
				t.Fatal(err)
			}
			if got.OK != tc.ok || !strings.Contains(got.Message, tc.message) {
				t.Fatalf("got %+v, want OK=%v and a message with %q", got, tc.ok, tc.message)
			}
		})
	}

	hs.SetServingStatus("db", healthpb.HealthCheckResponse_SERVING)
	if got, err := r.GRPC(t.Context(), withHealth, "db", 10*time.Second); err != nil || !got.OK {
		t.Fatalf("db serving: %+v %v", got, err)
	}
}
