package proc

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const noStreaming = "jetlet-proc has no streaming server: %s is not supported (ExecSync is; container output is in the CRI log)"

// Exec is not implemented: there is no streaming server.
func (r *Runtime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	return nil, status.Errorf(codes.Unimplemented, noStreaming, "exec")
}

// Attach is not implemented: containers' stdin is /dev/null and their output
// goes to the log.
func (r *Runtime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	return nil, status.Errorf(codes.Unimplemented, noStreaming, "attach")
}

// PortForward is not implemented: processes listen on the host's network
// directly, reachable at 127.0.0.1.
func (r *Runtime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	return nil, status.Errorf(codes.Unimplemented, noStreaming, "port-forward")
}
