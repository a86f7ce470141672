// Package criadapter implements reconcile.Runtime over the CRI client
// (runtime.Client): the one place where reconcile's plain types meet the
// CRI's generated ones. Conversions are field by field; the client's
// runtime.ErrNotFound becomes reconcile.ErrNotFound (the original error stays
// in the chain).
package criadapter

import (
	"context"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/runtime"
)

// CRI is the part of *runtime.Client the adapter uses.
type CRI interface {
	RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error)
	StopPodSandbox(ctx context.Context, id string) error
	RemovePodSandbox(ctx context.Context, id string) error
	PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error)
	ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error)
	CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, timeoutSeconds int64) error
	RemoveContainer(ctx context.Context, id string) error
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
	ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error)
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error)
	PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error)
}

var _ CRI = (*runtime.Client)(nil)

// Adapter implements reconcile.Runtime over a CRI client.
type Adapter struct {
	cri CRI
	// RuntimeHandler is passed to RunPodSandbox ("" for the default).
	RuntimeHandler string
}

var _ reconcile.Runtime = (*Adapter)(nil)

// New returns an Adapter over c (usually a *runtime.Client).
func New(c CRI) *Adapter { return &Adapter{cri: c} }

// notFound keeps err and adds reconcile.ErrNotFound when the client said
// the object does not exist.
type notFound struct{ err error }

func (e notFound) Error() string   { return e.err.Error() }
func (e notFound) Unwrap() []error { return []error{e.err, reconcile.ErrNotFound} }

func convertErr(err error) error {
	if err != nil && errors.Is(err, runtime.ErrNotFound) {
		return notFound{err}
	}
	return err
}

// RunPodSandbox implements reconcile.SandboxManager.
func (a *Adapter) RunPodSandbox(ctx context.Context, config *reconcile.SandboxConfig) (string, error) {
	id, err := a.cri.RunPodSandbox(ctx, toCRISandboxConfig(config), a.RuntimeHandler)
	return id, convertErr(err)
}

// StopPodSandbox implements reconcile.SandboxManager.
func (a *Adapter) StopPodSandbox(ctx context.Context, id string) error {
	return convertErr(a.cri.StopPodSandbox(ctx, id))
}

// RemovePodSandbox implements reconcile.SandboxManager.
func (a *Adapter) RemovePodSandbox(ctx context.Context, id string) error {
	return convertErr(a.cri.RemovePodSandbox(ctx, id))
}

// PodSandboxStatus implements reconcile.SandboxManager.
func (a *Adapter) PodSandboxStatus(ctx context.Context, id string) (*reconcile.SandboxStatus, error) {
	resp, err := a.cri.PodSandboxStatus(ctx, id, false)
	if err != nil {
		return nil, convertErr(err)
	}
	s := resp.GetStatus()
	if s == nil {
		return nil, fmt.Errorf("sandbox %s: runtime returned no status", id)
	}
	out := &reconcile.SandboxStatus{
		ID:          s.GetId(),
		Metadata:    fromCRISandboxMetadata(s.GetMetadata()),
		State:       fromCRISandboxState(s.GetState()),
		CreatedAt:   fromNanos(s.GetCreatedAt()),
		IP:          s.GetNetwork().GetIp(),
		Labels:      s.GetLabels(),
		Annotations: s.GetAnnotations(),
	}
	for _, ip := range s.GetNetwork().GetAdditionalIps() {
		out.AdditionalIPs = append(out.AdditionalIPs, ip.GetIp())
	}
	out.Namespaces = fromCRINamespaceOptions(s.GetLinux().GetNamespaces().GetOptions())
	return out, nil
}

// ListPodSandbox implements reconcile.SandboxManager.
func (a *Adapter) ListPodSandbox(ctx context.Context, filter *reconcile.SandboxFilter) ([]*reconcile.Sandbox, error) {
	var f *runtimeapi.PodSandboxFilter
	if filter != nil {
		f = &runtimeapi.PodSandboxFilter{Id: filter.ID, LabelSelector: filter.LabelSelector}
		if filter.State != nil {
			f.State = &runtimeapi.PodSandboxStateValue{State: toCRISandboxState(*filter.State)}
		}
	}
	items, err := a.cri.ListPodSandbox(ctx, f)
	if err != nil {
		return nil, convertErr(err)
	}
	out := make([]*reconcile.Sandbox, 0, len(items))
	for _, s := range items {
		out = append(out, &reconcile.Sandbox{
			ID:          s.GetId(),
			Metadata:    fromCRISandboxMetadata(s.GetMetadata()),
			State:       fromCRISandboxState(s.GetState()),
			CreatedAt:   fromNanos(s.GetCreatedAt()),
			Labels:      s.GetLabels(),
			Annotations: s.GetAnnotations(),
		})
	}
	return out, nil
}

// CreateContainer implements reconcile.ContainerManager.
func (a *Adapter) CreateContainer(ctx context.Context, sandboxID string, config *reconcile.ContainerConfig, sandboxConfig *reconcile.SandboxConfig) (string, error) {
	id, err := a.cri.CreateContainer(ctx, sandboxID, toCRIContainerConfig(config), toCRISandboxConfig(sandboxConfig))
	return id, convertErr(err)
}

// StartContainer implements reconcile.ContainerManager.
func (a *Adapter) StartContainer(ctx context.Context, id string) error {
	return convertErr(a.cri.StartContainer(ctx, id))
}

// StopContainer implements reconcile.ContainerManager.
func (a *Adapter) StopContainer(ctx context.Context, id string, timeoutSeconds int64) error {
	return convertErr(a.cri.StopContainer(ctx, id, timeoutSeconds))
}

// RemoveContainer implements reconcile.ContainerManager.
func (a *Adapter) RemoveContainer(ctx context.Context, id string) error {
	return convertErr(a.cri.RemoveContainer(ctx, id))
}

// ListContainers implements reconcile.ContainerManager.
func (a *Adapter) ListContainers(ctx context.Context, filter *reconcile.ContainerFilter) ([]*reconcile.Container, error) {
	var f *runtimeapi.ContainerFilter
	if filter != nil {
		f = &runtimeapi.ContainerFilter{Id: filter.ID, PodSandboxId: filter.PodSandboxID, LabelSelector: filter.LabelSelector}
		if filter.State != nil {
			f.State = &runtimeapi.ContainerStateValue{State: toCRIContainerState(*filter.State)}
		}
	}
	items, err := a.cri.ListContainers(ctx, f)
	if err != nil {
		return nil, convertErr(err)
	}
	out := make([]*reconcile.Container, 0, len(items))
	for _, c := range items {
		out = append(out, &reconcile.Container{
			ID:           c.GetId(),
			PodSandboxID: c.GetPodSandboxId(),
			Metadata:     fromCRIContainerMetadata(c.GetMetadata()),
			Image:        c.GetImage().GetImage(),
			ImageRef:     c.GetImageRef(),
			State:        fromCRIContainerState(c.GetState()),
			CreatedAt:    fromNanos(c.GetCreatedAt()),
			Labels:       c.GetLabels(),
			Annotations:  c.GetAnnotations(),
		})
	}
	return out, nil
}

// ContainerStatus implements reconcile.ContainerManager.
func (a *Adapter) ContainerStatus(ctx context.Context, id string) (*reconcile.ContainerInfo, error) {
	resp, err := a.cri.ContainerStatus(ctx, id, false)
	if err != nil {
		return nil, convertErr(err)
	}
	s := resp.GetStatus()
	if s == nil {
		return nil, fmt.Errorf("container %s: runtime returned no status", id)
	}
	out := &reconcile.ContainerInfo{
		ID:          s.GetId(),
		Metadata:    fromCRIContainerMetadata(s.GetMetadata()),
		State:       fromCRIContainerState(s.GetState()),
		CreatedAt:   fromNanos(s.GetCreatedAt()),
		StartedAt:   fromNanos(s.GetStartedAt()),
		FinishedAt:  fromNanos(s.GetFinishedAt()),
		ExitCode:    s.GetExitCode(),
		Image:       s.GetImage().GetImage(),
		ImageRef:    s.GetImageRef(),
		Reason:      s.GetReason(),
		Message:     s.GetMessage(),
		Labels:      s.GetLabels(),
		Annotations: s.GetAnnotations(),
		LogPath:     s.GetLogPath(),
	}
	for _, m := range s.GetMounts() {
		out.Mounts = append(out.Mounts, fromCRIMount(m))
	}
	return out, nil
}

// ImageStatus implements reconcile.ImageManager.
func (a *Adapter) ImageStatus(ctx context.Context, image reconcile.ImageSpec) (*reconcile.Image, error) {
	resp, err := a.cri.ImageStatus(ctx, toCRIImageSpec(image), false)
	if err != nil {
		return nil, convertErr(err)
	}
	im := resp.GetImage()
	if im == nil {
		return nil, nil
	}
	return &reconcile.Image{ID: im.GetId(), RepoTags: im.GetRepoTags(), RepoDigests: im.GetRepoDigests(), Size: im.GetSize()}, nil
}

// PullImage implements reconcile.ImageManager.
func (a *Adapter) PullImage(ctx context.Context, image reconcile.ImageSpec, sandboxConfig *reconcile.SandboxConfig) (string, error) {
	ref, err := a.cri.PullImage(ctx, toCRIImageSpec(image), nil, toCRISandboxConfig(sandboxConfig))
	return ref, convertErr(err)
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
