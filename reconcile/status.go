package reconcile

import (
	"time"
)

// PodStatus is what the runtime holds for one pod, after kubelet's
// kubecontainer.PodStatus: every sandbox and every container instance,
// newest first. It is read from the runtime alone.
type PodStatus struct {
	UID       string
	Name      string
	Namespace string
	// IPs of the newest sandbox, when it is ready.
	IPs []string
	// SandboxStatuses, newest first.
	SandboxStatuses []*SandboxStatus
	// ContainerStatuses, every instance of every container, newest first.
	ContainerStatuses []*ContainerStatus
}

// ContainerStatus is one container instance as reconcile sees it, after
// kubelet's kubecontainer.Status: the CRI status plus what jetlet keeps in
// labels and annotations.
type ContainerStatus struct {
	ID        string
	Name      string
	SandboxID string
	State     ContainerState
	CreatedAt time.Time
	StartedAt time.Time
	// FinishedAt is zero unless the container exited.
	FinishedAt time.Time
	ExitCode   int32
	Image      string
	ImageRef   string
	Reason     string
	Message    string
	// Hash is the spec hash the instance was created from.
	Hash string
	// RestartCount is the instance's restart count (its annotation).
	RestartCount int
	// Attempt is the CRI metadata attempt (equal to RestartCount for jetlet's
	// containers).
	Attempt uint32
	// Init is true for instances of init containers.
	Init bool
	// TerminationGracePeriod from the annotation, seconds; 0 when absent.
	TerminationGracePeriod int64
}

// FindContainerStatusByName returns the newest instance of the named container.
func (s *PodStatus) FindContainerStatusByName(name string) *ContainerStatus {
	if s == nil {
		return nil
	}
	for _, c := range s.ContainerStatuses {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// FindContainerStatusByID returns the instance with that id.
func (s *PodStatus) FindContainerStatusByID(id string) *ContainerStatus {
	if s == nil {
		return nil
	}
	for _, c := range s.ContainerStatuses {
		if c.ID == id {
			return c
		}
	}
	return nil
}

// RunningContainers returns the instances that may be running (Running or Unknown).
func (s *PodStatus) RunningContainers() []*ContainerStatus {
	var out []*ContainerStatus
	if s == nil {
		return out
	}
	for _, c := range s.ContainerStatuses {
		if c.State == ContainerRunning || c.State == ContainerUnknown {
			out = append(out, c)
		}
	}
	return out
}

// podIPs are the sandbox's IPs, the primary first; none without a primary.
func (s *SandboxStatus) podIPs() []string {
	if s.IP == "" {
		return nil
	}
	return append([]string{s.IP}, s.AdditionalIPs...)
}

// RuntimePod is one pod as GetPods sees it: what the runtime holds, grouped
// by the pod uid label.
type RuntimePod struct {
	UID        string
	Name       string
	Namespace  string
	Sandboxes  []*Sandbox
	Containers []*Container
}
