package reconcile

import (
	"context"
	"errors"
)

// ErrNotFound is what a Runtime returns (wrapped or bare) when the sandbox,
// container or image asked for does not exist. runtime/criadapter maps the CRI
// client's own not-found sentinel to it.
var ErrNotFound = errors.New("reconcile: not found")

// SandboxManager is the sandbox part of the CRI that reconcile uses.
// StopPodSandbox and RemovePodSandbox are idempotent: an absent sandbox is success.
type SandboxManager interface {
	RunPodSandbox(ctx context.Context, config *SandboxConfig) (string, error)
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
	PodSandboxStatus(ctx context.Context, id string) (*SandboxStatus, error)
	ListPodSandbox(ctx context.Context, filter *SandboxFilter) ([]*Sandbox, error)
}

// ContainerManager is the container part of the CRI that reconcile uses.
// StopContainer and RemoveContainer are idempotent: an absent container is success.
type ContainerManager interface {
	CreateContainer(ctx context.Context, sandboxID string, config *ContainerConfig, sandboxConfig *SandboxConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	// StopContainer signals the container to stop and kills it once timeout
	// seconds have passed.
	StopContainer(ctx context.Context, id string, timeoutSeconds int64) error
	RemoveContainer(ctx context.Context, id string) error
	ListContainers(ctx context.Context, filter *ContainerFilter) ([]*Container, error)
	ContainerStatus(ctx context.Context, id string) (*ContainerInfo, error)
}

// ImageManager is the image part of the CRI that reconcile uses.
type ImageManager interface {
	// ImageStatus returns nil and no error when the image is not present.
	ImageStatus(ctx context.Context, image ImageSpec) (*Image, error)
	// PullImage returns the image reference (an id or digest).
	PullImage(ctx context.Context, image ImageSpec, sandboxConfig *SandboxConfig) (string, error)
}

// Runtime is everything reconcile asks of a container runtime.
type Runtime interface {
	SandboxManager
	ContainerManager
	ImageManager
}

// IsNotFound reports whether err says the object does not exist.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
