package reconcile

import (
	"context"
	"errors"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// The roles below are the CRI calls reconcile makes, in the CRI's own types
// and with exactly the signatures of *runtime.Client, as kubelet's
// kuberuntime declares its internalapi over them. Errors wrap one of crierr's
// sentinels; reconcile tests only for crierr.ErrNotFound.

// SandboxManager is the sandbox part of the CRI that reconcile uses.
// StopPodSandbox and RemovePodSandbox are idempotent: an absent sandbox is success.
type SandboxManager interface {
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
	PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
}

// ContainerManager is the container part of the CRI that reconcile uses.
// StopContainer and RemoveContainer are idempotent: an absent container is success.
type ContainerManager interface {
	CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	// StopContainer signals the container to stop and kills it once timeout
	// seconds have passed.
	StopContainer(ctx context.Context, id string, timeoutSeconds int64) error
	RemoveContainer(ctx context.Context, id string) error
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	// ExecSync runs cmd in a running container (exec probes and hooks); a
	// command that runs and exits non-zero is not an error.
	ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error)
}

// ContainerResizer is the part of the CRI an in-place resize uses: the new
// resources of a running container or of its pod's cgroup (pod-level
// resources), and its memory usage before a memory limit is lowered.
type ContainerResizer interface {
	UpdateContainerResources(ctx context.Context, id string, resources *runtimeapi.ContainerResources) error
	UpdatePodSandboxResources(ctx context.Context, sandboxID string, resources *runtimeapi.LinuxContainerResources) error
	ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error)
}

// ImageManager is the image part of the CRI that reconcile uses.
type ImageManager interface {
	// ImageStatus answers with a nil Image when the image is not present.
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error)
	// PullImage returns the image reference (an id or digest).
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
}

// Runtime is everything reconcile asks of a container runtime.
type Runtime interface {
	SandboxManager
	ContainerManager
	ContainerResizer
	ImageManager
}

// defaultRuntimeHandler asks the runtime for its default handler: jetlet has
// no RuntimeClass to choose another.
const defaultRuntimeHandler = ""

func isNotFound(err error) bool { return errors.Is(err, crierr.ErrNotFound) }
