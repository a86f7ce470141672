package reconcile

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// fakeRuntime is an in-memory Runtime for unit tests and benchmarks; it
// follows the CRI's semantics for what reconcile uses, with time.Now (the
// synctest bubble's clock inside one).
type fakeRuntime struct {
	mu         sync.Mutex
	next       int
	sandboxes  map[string]*SandboxStatus
	containers map[string]*fakeContainer
	images     map[string]bool
}

type fakeContainer struct {
	info      ContainerInfo
	sandboxID string
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{sandboxes: map[string]*SandboxStatus{}, containers: map[string]*fakeContainer{}, images: map[string]bool{}}
}

func (f *fakeRuntime) id(prefix string) string {
	f.next++
	return fmt.Sprintf("%s%04d", prefix, f.next)
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (f *fakeRuntime) RunPodSandbox(_ context.Context, c *SandboxConfig) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.id("sb")
	f.sandboxes[id] = &SandboxStatus{
		ID: id, Metadata: c.Metadata, State: SandboxReady, CreatedAt: time.Now(), IP: "10.0.0.1",
		Namespaces: c.SecurityContext.NamespaceOptions, Labels: c.Labels, Annotations: c.Annotations,
	}
	return id, nil
}

func (f *fakeRuntime) StopPodSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.sandboxes[id]; ok {
		s.State = SandboxNotReady
		for _, c := range f.containers {
			if c.sandboxID == id && c.info.State == ContainerRunning {
				c.info.State, c.info.ExitCode, c.info.FinishedAt = ContainerExited, 137, time.Now()
			}
		}
	}
	return nil
}

func (f *fakeRuntime) RemovePodSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sandboxes, id)
	for cid, c := range f.containers {
		if c.sandboxID == id {
			delete(f.containers, cid)
		}
	}
	return nil
}

func (f *fakeRuntime) PodSandboxStatus(_ context.Context, id string) (*SandboxStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sandboxes[id]
	if !ok {
		return nil, fmt.Errorf("sandbox %s: %w", id, ErrNotFound)
	}
	c := *s
	return &c, nil
}

func (f *fakeRuntime) ListPodSandbox(_ context.Context, filter *SandboxFilter) ([]*Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*Sandbox
	for _, s := range f.sandboxes {
		if filter != nil && ((filter.ID != "" && filter.ID != s.ID) || (filter.State != nil && *filter.State != s.State) || !matches(filter.LabelSelector, s.Labels)) {
			continue
		}
		out = append(out, &Sandbox{ID: s.ID, Metadata: s.Metadata, State: s.State, CreatedAt: s.CreatedAt, Labels: s.Labels, Annotations: s.Annotations})
	}
	return out, nil
}

func (f *fakeRuntime) CreateContainer(_ context.Context, sandboxID string, c *ContainerConfig, _ *SandboxConfig) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.sandboxes[sandboxID]; !ok || s.State != SandboxReady {
		return "", fmt.Errorf("sandbox %s not ready", sandboxID)
	}
	id := f.id("c")
	f.containers[id] = &fakeContainer{sandboxID: sandboxID, info: ContainerInfo{
		ID: id, Metadata: c.Metadata, State: ContainerCreated, CreatedAt: time.Now(),
		Image: c.Image.Image, ImageRef: c.Image.Image, Labels: c.Labels, Annotations: c.Annotations, LogPath: c.LogPath,
	}}
	return id, nil
}

func (f *fakeRuntime) StartContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return fmt.Errorf("container %s: %w", id, ErrNotFound)
	}
	c.info.State, c.info.StartedAt = ContainerRunning, time.Now()
	return nil
}

func (f *fakeRuntime) StopContainer(_ context.Context, id string, _ int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.containers[id]; ok && c.info.State == ContainerRunning {
		c.info.State, c.info.ExitCode, c.info.FinishedAt, c.info.Reason = ContainerExited, 143, time.Now(), "Error"
	}
	return nil
}

func (f *fakeRuntime) RemoveContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.containers, id)
	return nil
}

func (f *fakeRuntime) ListContainers(_ context.Context, filter *ContainerFilter) ([]*Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*Container
	for _, c := range f.containers {
		i := &c.info
		if filter != nil && ((filter.ID != "" && filter.ID != i.ID) || (filter.PodSandboxID != "" && filter.PodSandboxID != c.sandboxID) ||
			(filter.State != nil && *filter.State != i.State) || !matches(filter.LabelSelector, i.Labels)) {
			continue
		}
		out = append(out, &Container{ID: i.ID, PodSandboxID: c.sandboxID, Metadata: i.Metadata, Image: i.Image, ImageRef: i.ImageRef,
			State: i.State, CreatedAt: i.CreatedAt, Labels: i.Labels, Annotations: i.Annotations})
	}
	return out, nil
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, id string) (*ContainerInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %s: %w", id, ErrNotFound)
	}
	info := c.info
	return &info, nil
}

func (f *fakeRuntime) ImageStatus(_ context.Context, image ImageSpec) (*Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.images[image.Image] {
		return &Image{ID: "sha256:" + image.Image, RepoTags: []string{image.Image}}, nil
	}
	return nil, nil
}

func (f *fakeRuntime) PullImage(_ context.Context, image ImageSpec, _ *SandboxConfig) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[image.Image] = true
	return "sha256:" + image.Image, nil
}

// exit makes every running instance of the named container exit with code.
func (f *fakeRuntime) exit(name string, code int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if c.info.Labels[LabelContainerName] == name && c.info.State == ContainerRunning {
			c.info.State, c.info.ExitCode, c.info.FinishedAt = ContainerExited, code, time.Now()
		}
	}
}

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

func (c *countingRuntime) RunPodSandbox(ctx context.Context, cfg *SandboxConfig) (string, error) {
	c.count("RunPodSandbox")
	return c.Runtime.RunPodSandbox(ctx, cfg)
}
func (c *countingRuntime) StopPodSandbox(ctx context.Context, id string) error {
	c.count("StopPodSandbox")
	return c.Runtime.StopPodSandbox(ctx, id)
}
func (c *countingRuntime) RemovePodSandbox(ctx context.Context, id string) error {
	c.count("RemovePodSandbox")
	return c.Runtime.RemovePodSandbox(ctx, id)
}
func (c *countingRuntime) PodSandboxStatus(ctx context.Context, id string) (*SandboxStatus, error) {
	c.count("PodSandboxStatus")
	return c.Runtime.PodSandboxStatus(ctx, id)
}
func (c *countingRuntime) ListPodSandbox(ctx context.Context, f *SandboxFilter) ([]*Sandbox, error) {
	c.count("ListPodSandbox")
	return c.Runtime.ListPodSandbox(ctx, f)
}
func (c *countingRuntime) CreateContainer(ctx context.Context, sb string, cfg *ContainerConfig, sc *SandboxConfig) (string, error) {
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
func (c *countingRuntime) ListContainers(ctx context.Context, f *ContainerFilter) ([]*Container, error) {
	c.count("ListContainers")
	return c.Runtime.ListContainers(ctx, f)
}
func (c *countingRuntime) ContainerStatus(ctx context.Context, id string) (*ContainerInfo, error) {
	c.count("ContainerStatus")
	return c.Runtime.ContainerStatus(ctx, id)
}
func (c *countingRuntime) ImageStatus(ctx context.Context, im ImageSpec) (*Image, error) {
	c.count("ImageStatus")
	return c.Runtime.ImageStatus(ctx, im)
}
func (c *countingRuntime) PullImage(ctx context.Context, im ImageSpec, sc *SandboxConfig) (string, error) {
	c.count("PullImage")
	return c.Runtime.PullImage(ctx, im, sc)
}
