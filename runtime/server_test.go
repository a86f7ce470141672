package runtime

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime is a small CRI server for the client's tests: it answers
// Version as a v1 runtime and every other call through a per-method hook
// (Unimplemented without one). It counts the calls it receives.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	apiVersion string // Version's RuntimeApiVersion; "v1" when empty

	mu    sync.Mutex
	calls map[string]int
	hooks map[string]func(ctx context.Context) error
	// events, when set, is what GetContainerEvents streams before
	// blocking until the client goes away.
	events []*runtimeapi.ContainerEventResponse
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{calls: map[string]int{}, hooks: map[string]func(context.Context) error{}}
}

func (f *fakeRuntime) on(method string, hook func(ctx context.Context) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hooks[method] = hook
}

func (f *fakeRuntime) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// handle records the call and runs its hook.
func (f *fakeRuntime) handle(ctx context.Context, method string) error {
	f.mu.Lock()
	f.calls[method]++
	hook := f.hooks[method]
	f.mu.Unlock()
	if hook == nil {
		return status.Errorf(codes.Unimplemented, "method %s not implemented", method)
	}
	return hook(ctx)
}

func (f *fakeRuntime) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	f.mu.Lock()
	f.calls["Version"]++
	hook := f.hooks["Version"]
	f.mu.Unlock()
	if hook != nil {
		if err := hook(ctx); err != nil {
			return nil, err
		}
	}
	api := f.apiVersion
	if api == "" {
		api = "v1"
	}
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1.2.3", RuntimeApiVersion: api}, nil
}

func (f *fakeRuntime) Status(ctx context.Context, _ *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	if err := f.handle(ctx, "Status"); err != nil {
		return nil, err
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}}, nil
}

func (f *fakeRuntime) ListContainers(ctx context.Context, _ *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	if err := f.handle(ctx, "ListContainers"); err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{Id: "c1"}}}, nil
}

func (f *fakeRuntime) ContainerStatus(ctx context.Context, r *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	if err := f.handle(ctx, "ContainerStatus"); err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: r.ContainerId}}, nil
}

func (f *fakeRuntime) StartContainer(ctx context.Context, _ *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	if err := f.handle(ctx, "StartContainer"); err != nil {
		return nil, err
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

func (f *fakeRuntime) StopContainer(ctx context.Context, _ *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	if err := f.handle(ctx, "StopContainer"); err != nil {
		return nil, err
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

func (f *fakeRuntime) RemoveContainer(ctx context.Context, _ *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	if err := f.handle(ctx, "RemoveContainer"); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (f *fakeRuntime) StopPodSandbox(ctx context.Context, _ *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	if err := f.handle(ctx, "StopPodSandbox"); err != nil {
		return nil, err
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (f *fakeRuntime) RemovePodSandbox(ctx context.Context, _ *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	if err := f.handle(ctx, "RemovePodSandbox"); err != nil {
		return nil, err
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (f *fakeRuntime) ExecSync(ctx context.Context, r *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if err := f.handle(ctx, "ExecSync"); err != nil {
		return nil, err
	}
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(strconv.FormatInt(r.Timeout, 10)), ExitCode: 3}, nil
}

func (f *fakeRuntime) RemoveImage(ctx context.Context, _ *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	if err := f.handle(ctx, "RemoveImage"); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (f *fakeRuntime) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	if err := f.handle(stream.Context(), "GetContainerEvents"); err != nil {
		return err
	}
	for _, ev := range f.events {
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return nil
}

// testServer serves a fakeRuntime on a unix socket and can be stopped and
// started again on the same path, like a restarting runtime.
type testServer struct {
	t    *testing.T
	fake *fakeRuntime
	path string
	srv  *grpc.Server
	done chan struct{}
}

func startTestServer(t *testing.T, fake *fakeRuntime) *testServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "jc") // short: sun_path is 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &testServer{t: t, fake: fake, path: filepath.Join(dir, "cri.sock")}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *testServer) endpoint() string { return "unix://" + s.path }

func (s *testServer) start() {
	s.t.Helper()
	_ = os.Remove(s.path)
	lis, err := net.Listen("unix", s.path)
	if err != nil {
		s.t.Fatal(err)
	}
	s.srv = grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(s.srv, s.fake)
	runtimeapi.RegisterImageServiceServer(s.srv, s.fake)
	s.done = make(chan struct{})
	go func(srv *grpc.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(lis)
	}(s.srv, s.done)
}

// stop closes the listener and every connection at once, like a runtime
// process that exits. Safe to call twice.
func (s *testServer) stop() {
	if s.srv == nil {
		return
	}
	s.srv.Stop()
	<-s.done
	s.srv = nil
}
