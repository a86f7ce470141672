package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestDialTarget(t *testing.T) {
	tests := []struct {
		name, endpoint, want string
		wantErr              bool
	}{
		{name: "unix scheme", endpoint: "unix:///run/containerd/containerd.sock", want: "unix:///run/containerd/containerd.sock"},
		{name: "bare path", endpoint: "/run/jetlet/cri.sock", want: "unix:///run/jetlet/cri.sock"},
		{name: "bare path cleaned", endpoint: "/run//jetlet/./cri.sock", want: "unix:///run/jetlet/cri.sock"},
		{name: "empty", endpoint: "", wantErr: true},
		{name: "tcp", endpoint: "tcp://127.0.0.1:1234", wantErr: true},
		{name: "relative", endpoint: "cri.sock", wantErr: true},
		{name: "unix relative", endpoint: "unix://cri.sock", wantErr: true},
		{name: "unix opaque", endpoint: "unix:cri.sock", wantErr: true},
		{name: "too long", endpoint: "/" + strings.Repeat("a", 120), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dialTarget(tt.endpoint)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("dialTarget(%q) = %q, %v; want ErrInvalidConfig", tt.endpoint, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("dialTarget(%q) = %q, %v; want %q", tt.endpoint, got, err, tt.want)
			}
		})
	}
}

func TestConfigDefaultsAndValidate(t *testing.T) {
	c, err := New(Config{Endpoint: "/run/x.sock"})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.RequestTimeout != 2*time.Minute || c.cfg.MaxMsgSize != DefaultMaxMsgSize {
		t.Fatalf("defaults not applied: %+v", c.cfg)
	}
	for _, cfg := range []Config{
		{},
		{Endpoint: "/run/x.sock", RequestTimeout: -time.Second},
		{Endpoint: "/run/x.sock", ReconnectMaxDelay: -time.Second},
		{Endpoint: "/run/x.sock", MaxMsgSize: -1},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) err = %v; want ErrInvalidConfig", cfg, err)
		}
	}
}

// connect returns a connected client for srv, with short retry and reconnect
// intervals so the tests do not wait for production defaults.
func connect(t *testing.T, srv *testServer, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{
		Endpoint:                 srv.endpoint(),
		RequestTimeout:           10 * time.Second,
		ReadRetryMaxElapsed:      2 * time.Second,
		ReadRetryInitialInterval: 10 * time.Millisecond,
		ReconnectMaxDelay:        200 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestNotConnected(t *testing.T) {
	c, err := New(Config{Endpoint: "/nonexistent/cri.sock"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListContainers(context.Background(), nil); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("err = %v; want ErrNotConnected", err)
	}
}

func TestConnectRuntimeDown(t *testing.T) {
	c, err := New(Config{Endpoint: "/nonexistent/cri.sock", ReadRetryMaxElapsed: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Connect(context.Background())
	if !errors.Is(err, ErrUnavailable) || !IsRetryable(err) {
		t.Fatalf("Connect err = %v; want retryable ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "/nonexistent/cri.sock") {
		t.Errorf("error %q does not name the endpoint", err)
	}
}

func TestConnectVersionMismatch(t *testing.T) {
	fake := newFakeRuntime()
	fake.apiVersion = "v1alpha2"
	srv := startTestServer(t, fake)
	c, err := New(Config{Endpoint: srv.endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Connect(context.Background())
	if !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Connect err = %v; want ErrUnsupportedVersion", err)
	}
	for _, want := range []string{"fake", "1.2.3", `"v1alpha2"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	if _, err := c.Status(context.Background(), false); !errors.Is(err, ErrNotConnected) {
		t.Errorf("after a failed Connect: err = %v; want ErrNotConnected", err)
	}
}

func TestConnectVersionUnimplemented(t *testing.T) {
	fake := newFakeRuntime()
	fake.on("Version", func(context.Context) error {
		return status.Error(codes.Unimplemented, "unknown service runtime.v1.RuntimeService")
	})
	srv := startTestServer(t, fake)
	c, err := New(Config{Endpoint: srv.endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Connect(context.Background()); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatalf("Connect err = %v; want ErrUnsupportedVersion", err)
	}
}

func TestConnectReportsRuntime(t *testing.T) {
	srv := startTestServer(t, newFakeRuntime())
	c := connect(t, srv, nil)
	if v := c.RuntimeVersion(); v.GetRuntimeName() != "fake" || v.GetRuntimeApiVersion() != "v1" {
		t.Fatalf("RuntimeVersion = %v", v)
	}
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		code      codes.Code
		want      error
		retryable bool
	}{
		{codes.NotFound, ErrNotFound, false},
		{codes.Unavailable, ErrUnavailable, true},
		{codes.DeadlineExceeded, ErrDeadlineExceeded, true},
		{codes.InvalidArgument, ErrInvalidArgument, false},
		{codes.AlreadyExists, ErrAlreadyExists, false},
		{codes.FailedPrecondition, ErrFailedPrecondition, false},
		{codes.Unimplemented, ErrUnimplemented, false},
		{codes.ResourceExhausted, ErrResourceExhausted, true},
		{codes.Aborted, ErrAborted, true},
		{codes.PermissionDenied, ErrPermissionDenied, false},
		{codes.Unauthenticated, ErrPermissionDenied, false},
		{codes.Internal, ErrInternal, false},
		{codes.Unknown, ErrInternal, false},
		{codes.DataLoss, ErrInternal, false},
	}
	fake := newFakeRuntime()
	srv := startTestServer(t, fake)
	// No read retries: each row is exactly one call.
	c := connect(t, srv, func(c *Config) { c.ReadRetryMaxElapsed = -1 })
	for _, tt := range tests {
		t.Run(tt.code.String(), func(t *testing.T) {
			fake.on("StartContainer", func(context.Context) error { return status.Error(tt.code, "the runtime says no") })
			err := c.StartContainer(context.Background(), "c1")
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v; want %v", err, tt.want)
			}
			if IsRetryable(err) != tt.retryable {
				t.Errorf("IsRetryable(%v) = %v; want %v", err, !tt.retryable, tt.retryable)
			}
			if !strings.Contains(err.Error(), "the runtime says no") || !strings.Contains(err.Error(), "StartContainer") {
				t.Errorf("err %q lost the method or the runtime's message", err)
			}
			// Nothing above the client may get at the gRPC status.
			var st interface{ GRPCStatus() *status.Status }
			if errors.As(err, &st) {
				t.Errorf("err %q still carries a gRPC status", err)
			}
		})
	}
}

func TestRequestTimeout(t *testing.T) {
	fake := newFakeRuntime()
	fake.on("ContainerStatus", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	srv := startTestServer(t, fake)
	c := connect(t, srv, func(c *Config) { c.RequestTimeout = 100 * time.Millisecond })
	_, err := c.ContainerStatus(context.Background(), "c1", false)
	if !errors.Is(err, ErrDeadlineExceeded) || !IsRetryable(err) {
		t.Fatalf("err = %v; want ErrDeadlineExceeded", err)
	}
	if n := fake.count("ContainerStatus"); n != 1 {
		t.Errorf("ContainerStatus called %d times; a deadline is not retried", n)
	}
}

func TestCallerCancel(t *testing.T) {
	fake := newFakeRuntime()
	started := make(chan struct{})
	fake.on("ListContainers", func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() })
	srv := startTestServer(t, fake)
	c := connect(t, srv, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if _, err := c.ListContainers(ctx, nil); !errors.Is(err, ErrCanceled) {
		t.Fatalf("err = %v; want ErrCanceled", err)
	}
}

// failFirst makes a hook that answers Unavailable n times, then succeeds.
func failFirst(n int) func(context.Context) error {
	var mu sync.Mutex
	return func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if n > 0 {
			n--
			return status.Error(codes.Unavailable, "restarting")
		}
		return nil
	}
}

func TestReadsRetriedWritesNot(t *testing.T) {
	fake := newFakeRuntime()
	srv := startTestServer(t, fake)
	c := connect(t, srv, nil)
	ctx := context.Background()

	fake.on("ListContainers", failFirst(2))
	got, err := c.ListContainers(ctx, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("ListContainers = %v, %v; want one container after retries", got, err)
	}
	if n := fake.count("ListContainers"); n != 3 {
		t.Errorf("ListContainers reached the runtime %d times; want 3", n)
	}

	fake.on("StartContainer", failFirst(1))
	if err := c.StartContainer(ctx, "c1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("StartContainer err = %v; want ErrUnavailable, not retried", err)
	}
	if n := fake.count("StartContainer"); n != 1 {
		t.Errorf("StartContainer reached the runtime %d times; a mutation must not be retried", n)
	}

	// Only Unavailable is retried, even for reads.
	fake.on("ContainerStatus", func(context.Context) error { return status.Error(codes.NotFound, "no such container") })
	if _, err := c.ContainerStatus(ctx, "gone", false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ContainerStatus err = %v; want ErrNotFound", err)
	}
	if n := fake.count("ContainerStatus"); n != 1 {
		t.Errorf("ContainerStatus reached the runtime %d times; want 1", n)
	}
}

func TestReadRetryGivesUp(t *testing.T) {
	fake := newFakeRuntime()
	fake.on("Status", func(context.Context) error { return status.Error(codes.Unavailable, "still down") })
	srv := startTestServer(t, fake)
	c := connect(t, srv, func(c *Config) { c.ReadRetryMaxElapsed = 200 * time.Millisecond })
	_, err := c.Status(context.Background(), false)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "still down") {
		t.Fatalf("err = %v; want the runtime's Unavailable", err)
	}
	if n := fake.count("Status"); n < 2 {
		t.Errorf("Status reached the runtime %d times; want retries", n)
	}
}

func TestStopRemoveNotFoundIsSuccess(t *testing.T) {
	fake := newFakeRuntime()
	srv := startTestServer(t, fake)
	c := connect(t, srv, nil)
	ctx := context.Background()
	notFound := func(context.Context) error {
		return status.Error(codes.NotFound, "an error occurred when try to find container")
	}
	internal := func(context.Context) error { return status.Error(codes.Internal, "boom") }
	calls := map[string]func() error{
		"StopContainer":    func() error { return c.StopContainer(ctx, "gone", 10) },
		"RemoveContainer":  func() error { return c.RemoveContainer(ctx, "gone") },
		"StopPodSandbox":   func() error { return c.StopPodSandbox(ctx, "gone") },
		"RemovePodSandbox": func() error { return c.RemovePodSandbox(ctx, "gone") },
		"RemoveImage":      func() error { return c.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: "gone"}) },
	}
	for method, fn := range calls {
		t.Run(method, func(t *testing.T) {
			fake.on(method, notFound)
			if err := fn(); err != nil {
				t.Fatalf("NotFound: err = %v; want nil", err)
			}
			fake.on(method, internal)
			if err := fn(); !errors.Is(err, ErrInternal) {
				t.Fatalf("Internal: err = %v; want ErrInternal", err)
			}
		})
	}
}

func TestExecSync(t *testing.T) {
	fake := newFakeRuntime()
	fake.on("ExecSync", func(context.Context) error { return nil })
	srv := startTestServer(t, fake)
	c := connect(t, srv, nil)
	resp, err := c.ExecSync(context.Background(), "c1", []string{"true"}, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	// Non-zero exit is data, not an error; sub-second parts round up.
	if resp.ExitCode != 3 || string(resp.Stdout) != "2" {
		t.Fatalf("ExecSync = exit %d stdout %q; want exit 3 and a 2s timeout sent", resp.ExitCode, resp.Stdout)
	}
}

func TestObserve(t *testing.T) {
	type obs struct {
		method string
		err    error
	}
	var mu sync.Mutex
	var seen []obs
	fake := newFakeRuntime()
	fake.on("ListContainers", failFirst(1))
	fake.on("StartContainer", func(context.Context) error { return status.Error(codes.NotFound, "no") })
	srv := startTestServer(t, fake)
	c := connect(t, srv, func(c *Config) {
		c.Observe = func(method string, d time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, obs{method, err})
		}
	})
	_, _ = c.ListContainers(context.Background(), nil)
	_ = c.StartContainer(context.Background(), "c1")
	mu.Lock()
	defer mu.Unlock()
	// Connect's Version, then one observation per call, retries included.
	if len(seen) != 3 || seen[0].method != "Version" || seen[1].method != "ListContainers" || seen[1].err != nil ||
		seen[2].method != "StartContainer" || !errors.Is(seen[2].err, ErrNotFound) {
		t.Fatalf("observed %+v", seen)
	}
}

func TestContainerEvents(t *testing.T) {
	t.Run("unimplemented", func(t *testing.T) {
		srv := startTestServer(t, newFakeRuntime()) // no hook: Unimplemented
		c := connect(t, srv, nil)
		err := c.GetContainerEvents(context.Background(), func(*runtimeapi.ContainerEventResponse) {
			t.Error("no event expected")
		})
		if !errors.Is(err, ErrUnimplemented) {
			t.Fatalf("err = %v; want ErrUnimplemented", err)
		}
	})
	t.Run("stream", func(t *testing.T) {
		fake := newFakeRuntime()
		fake.on("GetContainerEvents", func(context.Context) error { return nil })
		fake.events = []*runtimeapi.ContainerEventResponse{
			{ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
			{ContainerId: "c1", ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		}
		srv := startTestServer(t, fake)
		c := connect(t, srv, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var got []runtimeapi.ContainerEventType
		err := c.GetContainerEvents(ctx, func(ev *runtimeapi.ContainerEventResponse) {
			got = append(got, ev.ContainerEventType)
			if len(got) == 2 {
				cancel()
			}
		})
		if err != nil || len(got) != 2 || got[1] != runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT {
			t.Fatalf("events %v, err %v", got, err)
		}
	})
}

// TestRuntimeRestart stops the server under a connected client, checks that
// calls fail fast with a retryable ErrUnavailable instead of hanging, then
// starts a server on the same socket and checks the same client works again.
func TestRuntimeRestart(t *testing.T) {
	fake := newFakeRuntime()
	fake.on("ListContainers", func(context.Context) error { return nil })
	fake.on("StartContainer", func(context.Context) error { return nil })
	srv := startTestServer(t, fake)
	c := connect(t, srv, func(c *Config) {
		c.RequestTimeout = time.Minute // long: the failure must not come from a timeout
		c.ReadRetryMaxElapsed = 300 * time.Millisecond
	})
	ctx := context.Background()
	if _, err := c.ListContainers(ctx, nil); err != nil {
		t.Fatal(err)
	}

	srv.stop()
	_, err := c.ListContainers(ctx, nil)
	if !errors.Is(err, ErrUnavailable) || !IsRetryable(err) {
		t.Fatalf("read while down: err = %v; want retryable ErrUnavailable", err)
	}
	if err := c.StartContainer(ctx, "c1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("write while down: err = %v; want ErrUnavailable", err)
	}

	srv.start()
	// gRPC reconnects in the background; poll with a deadline.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err = c.ListContainers(ctx, nil)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("after restart: err = %v", err)
		}
	}
	if err := c.StartContainer(ctx, "c1"); err != nil {
		t.Fatalf("write after restart: %v", err)
	}
}
