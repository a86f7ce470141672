package reconcile

import (
	"context"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// countingRuntime counts the calls made through it.
type countingRuntime struct {
	Runtime
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingRuntime) count(m string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[m]++
}

func (c *countingRuntime) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

func (c *countingRuntime) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = nil
}

func (c *countingRuntime) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	c.count("RunPodSandbox")
	return c.Runtime.RunPodSandbox(ctx, cfg, handler)
}
func (c *countingRuntime) StopPodSandbox(ctx context.Context, id string) error {
	c.count("StopPodSandbox")
	return c.Runtime.StopPodSandbox(ctx, id)
}
func (c *countingRuntime) RemovePodSandbox(ctx context.Context, id string) error {
	c.count("RemovePodSandbox")
	return c.Runtime.RemovePodSandbox(ctx, id)
}
func (c *countingRuntime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	c.count("PodSandboxStatus")
	return c.Runtime.PodSandboxStatus(ctx, id, verbose)
}
func (c *countingRuntime) ListPodSandbox(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	c.count("ListPodSandbox")
	return c.Runtime.ListPodSandbox(ctx, f)
}
func (c *countingRuntime) CreateContainer(ctx context.Context, sb string, cfg *runtimeapi.ContainerConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	c.count("CreateContainer")
	return c.Runtime.CreateContainer(ctx, sb, cfg, sc)
}
func (c *countingRuntime) StartContainer(ctx context.Context, id string) error {
	c.count("StartContainer")
	return c.Runtime.StartContainer(ctx, id)
}
func (c *countingRuntime) StopContainer(ctx context.Context, id string, t int64) error {
	c.count("StopContainer")
	return c.Runtime.StopContainer(ctx, id, t)
}
func (c *countingRuntime) RemoveContainer(ctx context.Context, id string) error {
	c.count("RemoveContainer")
	return c.Runtime.RemoveContainer(ctx, id)
}
func (c *countingRuntime) ListContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	c.count("ListContainers")
	return c.Runtime.ListContainers(ctx, f)
}
func (c *countingRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	c.count("ContainerStatus")
	return c.Runtime.ContainerStatus(ctx, id, verbose)
}
func (c *countingRuntime) ImageStatus(ctx context.Context, im *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	c.count("ImageStatus")
	return c.Runtime.ImageStatus(ctx, im, verbose)
}
func (c *countingRuntime) PullImage(ctx context.Context, im *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	c.count("PullImage")
	return c.Runtime.PullImage(ctx, im, auth, sc)
}
