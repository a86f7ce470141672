package runtime

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The fake answers each stats call with one entry whose id echoes the
// filter's, so a test sees what reached the runtime.

func (f *fakeRuntime) ListContainerStats(ctx context.Context, r *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	if err := f.handle(ctx, "ListContainerStats"); err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: []*runtimeapi.ContainerStats{
		{Attributes: &runtimeapi.ContainerAttributes{Id: r.GetFilter().GetId()}},
	}}, nil
}

func (f *fakeRuntime) ListPodSandboxStats(ctx context.Context, r *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	if err := f.handle(ctx, "ListPodSandboxStats"); err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: []*runtimeapi.PodSandboxStats{
		{Attributes: &runtimeapi.PodSandboxAttributes{Id: r.GetFilter().GetId()}},
	}}, nil
}

func TestListStats(t *testing.T) {
	fake := newFakeRuntime()
	srv := startTestServer(t, fake)
	c := connect(t, srv, nil)
	ctx := context.Background()
	calls := map[string]func() (id string, err error){
		"ListContainerStats": func() (string, error) {
			stats, err := c.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{Id: "c1"})
			if len(stats) != 1 {
				return "", err
			}
			return stats[0].GetAttributes().GetId(), err
		},
		"ListPodSandboxStats": func() (string, error) {
			stats, err := c.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{Id: "c1"})
			if len(stats) != 1 {
				return "", err
			}
			return stats[0].GetAttributes().GetId(), err
		},
	}
	for method, list := range calls {
		t.Run(method, func(t *testing.T) {
			// A read: retried while the runtime is unavailable.
			fake.on(method, failFirst(1))
			if id, err := list(); err != nil || id != "c1" {
				t.Fatalf("%s = %q, %v; want the filter's id after a retry", method, id, err)
			}
			if n := fake.count(method); n != 2 {
				t.Errorf("%s reached the runtime %d times; want 2", method, n)
			}
			fake.on(method, func(context.Context) error { return status.Error(codes.Unimplemented, "no stats") })
			if _, err := list(); !errors.Is(err, ErrUnimplemented) {
				t.Fatalf("%s err = %v; want ErrUnimplemented", method, err)
			}
		})
	}
}
