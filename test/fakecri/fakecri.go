// Package fakecri is an in-memory CRI runtime for tests and benchmarks of
// the code above the runtime (reconcile, the pipeline): sandboxes and
// containers are map entries, a start is instantly running, a pull instantly
// present. It is no conformance target: the CRI suite in test/cri runs
// against real runtimes.
package fakecri

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// Runtime is an in-memory container runtime with the signatures of
// *runtime.Client, for unit tests and benchmarks; it follows the CRI's
// semantics for what reconcile uses (a started container runs until it is
// stopped or told to Exit), with time.Now (the
// synctest bubble's clock inside one). Like a real client, it answers with
// messages of its own the caller may keep: the stored ones never leave it, and
// as it changes only their top-level fields, a shallow copy is one of its own.
// (Not proto.Clone: its reflection metadata would stay live and, in the
// benchmarks' small heap, cost garbage collections reconcile does not cause.)
type Runtime struct {
	mu        sync.Mutex
	sandboxes map[string]*runtimeapi.PodSandboxStatus
	// podResources are each sandbox's pod-level resources, as last given.
	podResources map[string]*runtimeapi.LinuxContainerResources
	containers   map[string]*fakeContainer
	images       map[string]bool
	exec         func(id string, cmd []string) (*runtimeapi.ExecSyncResponse, error)
}

type fakeContainer struct {
	status    *runtimeapi.ContainerStatus
	sandboxID string
	memory    uint64 // the usage ListContainerStats reports, SetMemoryUsage's
}

// New returns a runtime that holds nothing.
func New() *Runtime {
	return &Runtime{sandboxes: map[string]*runtimeapi.PodSandboxStatus{}, podResources: map[string]*runtimeapi.LinuxContainerResources{}, containers: map[string]*fakeContainer{}, images: map[string]bool{}}
}

// id is unique across runtimes, as a real runtime's random ids are: event
// ids derive from them, and nodes share the events stream.
func (f *Runtime) id(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails on Linux
	return prefix + hex.EncodeToString(b)
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func (f *Runtime) RunPodSandbox(_ context.Context, c *runtimeapi.PodSandboxConfig, _ string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := f.id("sb")
	f.sandboxes[id] = &runtimeapi.PodSandboxStatus{
		Id: id, Metadata: c.Metadata, State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: time.Now().UnixNano(),
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.1"},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: c.GetLinux().GetSecurityContext().GetNamespaceOptions(),
		}},
		Labels: c.Labels, Annotations: c.Annotations,
	}
	f.podResources[id] = c.GetLinux().GetResources()
	return id, nil
}

func (f *Runtime) StopPodSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.sandboxes[id]; ok {
		s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		for _, c := range f.containers {
			if c.sandboxID == id && c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				c.status.State, c.status.ExitCode, c.status.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, 137, time.Now().UnixNano()
			}
		}
	}
	return nil
}

func (f *Runtime) RemovePodSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sandboxes, id)
	delete(f.podResources, id)
	for cid, c := range f.containers {
		if c.sandboxID == id {
			delete(f.containers, cid)
		}
	}
	return nil
}

func (f *Runtime) PodSandboxStatus(_ context.Context, id string, _ bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sandboxes[id]
	if !ok {
		return nil, fmt.Errorf("sandbox %s: %w", id, crierr.ErrNotFound)
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{
		Id: s.Id, Metadata: s.Metadata, State: s.State, CreatedAt: s.CreatedAt, Network: s.Network, Linux: s.Linux,
		Labels: s.Labels, Annotations: s.Annotations,
	}}, nil
}

func (f *Runtime) ListPodSandbox(_ context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.PodSandbox
	for _, s := range f.sandboxes {
		if filter != nil && ((filter.Id != "" && filter.Id != s.Id) || (filter.State != nil && filter.State.State != s.State) || !matches(filter.LabelSelector, s.Labels)) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{Id: s.Id, Metadata: s.Metadata, State: s.State, CreatedAt: s.CreatedAt, Labels: s.Labels, Annotations: s.Annotations})
	}
	return out, nil
}

func (f *Runtime) CreateContainer(_ context.Context, sandboxID string, c *runtimeapi.ContainerConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.sandboxes[sandboxID]; !ok || s.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", fmt.Errorf("sandbox %s not ready", sandboxID)
	}
	id := f.id("c")
	f.containers[id] = &fakeContainer{sandboxID: sandboxID, status: &runtimeapi.ContainerStatus{
		Id: id, Metadata: c.Metadata, State: runtimeapi.ContainerState_CONTAINER_CREATED, CreatedAt: time.Now().UnixNano(),
		Image: c.Image, ImageRef: c.Image.Image, Labels: c.Labels, Annotations: c.Annotations, LogPath: c.LogPath, Mounts: c.Mounts,
		Resources: resources(c.GetLinux().GetResources()),
	}}
	return id, nil
}

func (f *Runtime) StartContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return fmt.Errorf("container %s: %w", id, crierr.ErrNotFound)
	}
	c.status.State, c.status.StartedAt = runtimeapi.ContainerState_CONTAINER_RUNNING, time.Now().UnixNano()
	return nil
}

func (f *Runtime) StopContainer(_ context.Context, id string, _ int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.containers[id]; ok && c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		c.status.State, c.status.ExitCode, c.status.FinishedAt, c.status.Reason = runtimeapi.ContainerState_CONTAINER_EXITED, 143, time.Now().UnixNano(), "Error"
	}
	return nil
}

func (f *Runtime) RemoveContainer(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.containers, id)
	return nil
}

func (f *Runtime) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.Container
	for _, c := range f.containers {
		s := c.status
		if filter != nil && ((filter.Id != "" && filter.Id != s.Id) || (filter.PodSandboxId != "" && filter.PodSandboxId != c.sandboxID) ||
			(filter.State != nil && filter.State.State != s.State) || !matches(filter.LabelSelector, s.Labels)) {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: s.Id, PodSandboxId: c.sandboxID, Metadata: s.Metadata, Image: s.Image, ImageRef: s.ImageRef,
			State: s.State, CreatedAt: s.CreatedAt, Labels: s.Labels, Annotations: s.Annotations})
	}
	return out, nil
}

func (f *Runtime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return nil, fmt.Errorf("container %s: %w", id, crierr.ErrNotFound)
	}
	s := c.status
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{
		Id: s.Id, Metadata: s.Metadata, State: s.State, CreatedAt: s.CreatedAt, StartedAt: s.StartedAt, FinishedAt: s.FinishedAt,
		ExitCode: s.ExitCode, Image: s.Image, ImageRef: s.ImageRef, Reason: s.Reason, Labels: s.Labels, Annotations: s.Annotations, LogPath: s.LogPath,
		Mounts: s.Mounts, Resources: s.Resources,
	}}, nil
}

// resources is what ContainerStatus reports of r, as containerd does: the
// Linux resources last given; nil for none.
func resources(r *runtimeapi.LinuxContainerResources) *runtimeapi.ContainerResources {
	if r == nil {
		return nil
	}
	return &runtimeapi.ContainerResources{Linux: r}
}

// UpdateContainerResources takes a running or created container's new
// resources, as containerd does; ContainerStatus reports them from now on.
func (f *Runtime) UpdateContainerResources(_ context.Context, id string, r *runtimeapi.ContainerResources) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.containers[id]
	if !ok {
		return fmt.Errorf("container %s: %w", id, crierr.ErrNotFound)
	}
	if c.status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		return fmt.Errorf("container %s is not running", id)
	}
	c.status.Resources = resources(r.GetLinux())
	return nil
}

// UpdatePodSandboxResources takes a sandbox's new pod-level resources.
func (f *Runtime) UpdatePodSandboxResources(_ context.Context, id string, r *runtimeapi.LinuxContainerResources) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.sandboxes[id]; !ok {
		return fmt.Errorf("sandbox %s: %w", id, crierr.ErrNotFound)
	}
	f.podResources[id] = r
	return nil
}

// PodResources are the sandbox's pod-level resources, as last given
// (RunPodSandbox's config, then UpdatePodSandboxResources).
func (f *Runtime) PodResources(id string) *runtimeapi.LinuxContainerResources {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.podResources[id]
}

// SetMemoryUsage sets the memory usage ListContainerStats reports for the
// containers of that name.
func (f *Runtime) SetMemoryUsage(name string, bytes uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if c.status.Metadata.GetName() == name {
			c.memory = bytes
		}
	}
}

// ListContainerStats reports each matching container's memory usage (0
// unless SetMemoryUsage said otherwise).
func (f *Runtime) ListContainerStats(_ context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*runtimeapi.ContainerStats
	for id, c := range f.containers {
		if filter != nil && ((filter.Id != "" && filter.Id != id) || (filter.PodSandboxId != "" && filter.PodSandboxId != c.sandboxID) ||
			!matches(filter.LabelSelector, c.status.Labels)) {
			continue
		}
		out = append(out, &runtimeapi.ContainerStats{
			Attributes: &runtimeapi.ContainerAttributes{Id: id, Metadata: c.status.Metadata, Labels: c.status.Labels},
			Memory:     &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: c.memory}},
		})
	}
	return out, nil
}

func (f *Runtime) ImageStatus(_ context.Context, image *runtimeapi.ImageSpec, _ bool) (*runtimeapi.ImageStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.images[image.Image] {
		return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "sha256:" + image.Image, RepoTags: []string{image.Image}}}, nil
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

func (f *Runtime) PullImage(_ context.Context, image *runtimeapi.ImageSpec, _ *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[image.Image] = true
	return "sha256:" + image.Image, nil
}

// Exit makes every running instance of the named container exit with code.
func (f *Runtime) Exit(name string, code int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.containers {
		if c.status.Metadata.GetName() == name && c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.status.State, c.status.ExitCode, c.status.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, code, time.Now().UnixNano()
		}
	}
}

// OnExec makes ExecSync answer with fn; without it every command exits 0
// with no output.
func (f *Runtime) OnExec(fn func(id string, cmd []string) (*runtimeapi.ExecSyncResponse, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exec = fn
}

// ExecSync runs nothing: it answers as OnExec said, in a running container.
func (f *Runtime) ExecSync(_ context.Context, id string, cmd []string, _ time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	f.mu.Lock()
	c, ok := f.containers[id]
	fn := f.exec
	running := ok && c.status.State == runtimeapi.ContainerState_CONTAINER_RUNNING
	f.mu.Unlock()
	switch {
	case !ok:
		return nil, fmt.Errorf("container %s: %w", id, crierr.ErrNotFound)
	case !running:
		return nil, fmt.Errorf("container %s is not running", id)
	case fn != nil:
		return fn(id, cmd)
	}
	return &runtimeapi.ExecSyncResponse{}, nil
}
