package kubecontainer

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerState is a container instance's state, after kubelet's
// kubecontainer.State.
type ContainerState int

const (
	ContainerCreated ContainerState = iota
	ContainerRunning
	ContainerExited
	ContainerUnknown
)

func (s ContainerState) String() string {
	switch s {
	case ContainerCreated:
		return "Created"
	case ContainerRunning:
		return "Running"
	case ContainerExited:
		return "Exited"
	default:
		return "Unknown"
	}
}

// FromNanos reads a CRI timestamp; 0 (never happened) is the zero time.
func FromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// PodStatus is what the runtime holds for one pod, after kubelet's
// kubecontainer.PodStatus: every sandbox and every container instance,
// newest first. It is read from the runtime alone.
type PodStatus struct {
	UID       string
	Name      string
	Namespace string
	// IPs of the newest sandbox, when it is ready.
	IPs []string
	// SandboxStatuses, newest first, as the runtime reported them. They are
	// shared with reconcile's status cache: read them, never change them.
	SandboxStatuses []*runtimeapi.PodSandboxStatus
	// ContainerStatuses, every instance of every container, newest first.
	ContainerStatuses []*ContainerStatus
	// NetworkDown: the runtime's pod network was not ready when the status
	// was read, so a sandbox without an IP is expected.
	NetworkDown bool
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
	// PreStop is the preStop handler recorded on the instance, for kills
	// without the spec; nil when it has none.
	PreStop *corev1.LifecycleHandler
	// Resources are what the runtime says it applied (its ContainerStatus's
	// resources); nil when it says nothing.
	Resources *ContainerResources
}

// ContainerResources are a container's resources as the runtime applied
// them, after kubelet's kubecontainer.ContainerResources: each nil when the
// runtime applied none.
type ContainerResources struct {
	// CPURequest is read back from the CPU shares.
	CPURequest *resource.Quantity
	// CPULimit is read back from the CFS quota and period.
	CPULimit    *resource.Quantity
	MemoryLimit *resource.Quantity
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

// RuntimePod is one pod as GetPods sees it: what the runtime holds, grouped
// by the pod uid label, after kubelet's kubecontainer.Pod.
type RuntimePod struct {
	UID       string
	Name      string
	Namespace string
	// Sandboxes, newest first; a ready sandbox is ContainerRunning, any other
	// ContainerExited (as kubelet's).
	Sandboxes []*Container
	// Containers, every listed instance, newest first.
	Containers []*Container
}

// Container is one container instance or sandbox as GetPods lists it: what
// the relist loop compares, of kubelet's kubecontainer.Container.
type Container struct {
	ID    string
	State ContainerState
}

// AllocationPodLevel is the key of the pod-level resources among a pod's
// recorded allocation, beside its containers' names (which are DNS labels,
// never this).
const AllocationPodLevel = "-pod"
