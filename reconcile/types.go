package reconcile

import "time"

// The types below mirror the CRI (k8s.io/cri-api runtime/v1) for exactly the
// calls reconcile makes. They are plain values so that this package need not
// import the CRI's generated code, which carries the gRPC stubs with it.
// runtime/criadapter converts them field by field.

// SandboxState mirrors runtimeapi.PodSandboxState.
type SandboxState int

const (
	SandboxReady SandboxState = iota
	SandboxNotReady
)

func (s SandboxState) String() string {
	if s == SandboxReady {
		return "Ready"
	}
	return "NotReady"
}

// ContainerState mirrors runtimeapi.ContainerState.
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

// NamespaceMode mirrors runtimeapi.NamespaceMode.
type NamespaceMode int

const (
	// NamespacePod: a namespace shared by the pod's containers.
	NamespacePod NamespaceMode = iota
	// NamespaceContainer: a namespace of the container alone.
	NamespaceContainer
	// NamespaceNode: the node's (host's) namespace.
	NamespaceNode
	// NamespaceTarget: the namespace of another container.
	NamespaceTarget
)

// Protocol mirrors runtimeapi.Protocol.
type Protocol int

const (
	ProtocolTCP Protocol = iota
	ProtocolUDP
	ProtocolSCTP
)

// MountPropagation mirrors runtimeapi.MountPropagation.
type MountPropagation int

const (
	PropagationPrivate MountPropagation = iota
	PropagationHostToContainer
	PropagationBidirectional
)

// NamespaceOptions mirrors runtimeapi.NamespaceOption.
type NamespaceOptions struct {
	Network NamespaceMode
	PID     NamespaceMode
	IPC     NamespaceMode
}

// PortMapping mirrors runtimeapi.PortMapping.
type PortMapping struct {
	Protocol      Protocol
	ContainerPort int32
	HostPort      int32
	HostIP        string
}

// SandboxMetadata mirrors runtimeapi.PodSandboxMetadata.
type SandboxMetadata struct {
	Name      string
	UID       string
	Namespace string
	Attempt   uint32
}

// SandboxSecurityContext mirrors runtimeapi.LinuxSandboxSecurityContext.
type SandboxSecurityContext struct {
	NamespaceOptions   NamespaceOptions
	RunAsUser          *int64
	RunAsGroup         *int64
	SupplementalGroups []int64
	ReadonlyRootfs     bool
	Privileged         bool
}

// SandboxConfig mirrors runtimeapi.PodSandboxConfig.
type SandboxConfig struct {
	Metadata     SandboxMetadata
	Hostname     string
	LogDirectory string
	PortMappings []PortMapping
	Labels       map[string]string
	Annotations  map[string]string
	// Linux
	CgroupParent    string
	SecurityContext SandboxSecurityContext
	Sysctls         map[string]string
}

// SandboxStatus mirrors runtimeapi.PodSandboxStatus.
type SandboxStatus struct {
	ID        string
	Metadata  SandboxMetadata
	State     SandboxState
	CreatedAt time.Time
	// IP is the primary pod IP; AdditionalIPs the others (dual stack).
	IP            string
	AdditionalIPs []string
	// Namespaces are the namespace options the sandbox was created with.
	Namespaces  NamespaceOptions
	Labels      map[string]string
	Annotations map[string]string
}

// Sandbox mirrors runtimeapi.PodSandbox, an item of ListPodSandbox.
type Sandbox struct {
	ID          string
	Metadata    SandboxMetadata
	State       SandboxState
	CreatedAt   time.Time
	Labels      map[string]string
	Annotations map[string]string
}

// SandboxFilter mirrors runtimeapi.PodSandboxFilter. Zero fields do not filter.
type SandboxFilter struct {
	ID            string
	State         *SandboxState
	LabelSelector map[string]string
}

// ContainerMetadata mirrors runtimeapi.ContainerMetadata.
type ContainerMetadata struct {
	Name    string
	Attempt uint32
}

// KeyValue mirrors runtimeapi.KeyValue.
type KeyValue struct {
	Key   string
	Value string
}

// Mount mirrors runtimeapi.Mount.
type Mount struct {
	ContainerPath  string
	HostPath       string
	Readonly       bool
	SelinuxRelabel bool
	Propagation    MountPropagation
}

// LinuxResources mirrors runtimeapi.LinuxContainerResources.
type LinuxResources struct {
	CPUPeriod          int64
	CPUQuota           int64
	CPUShares          int64
	MemoryLimitInBytes int64
	OomScoreAdj        int64
	CpusetCpus         string
	CpusetMems         string
}

// Capability mirrors runtimeapi.Capability.
type Capability struct {
	AddCapabilities  []string
	DropCapabilities []string
}

// ContainerSecurityContext mirrors runtimeapi.LinuxContainerSecurityContext.
type ContainerSecurityContext struct {
	Capabilities       *Capability
	Privileged         bool
	NamespaceOptions   NamespaceOptions
	RunAsUser          *int64
	RunAsGroup         *int64
	RunAsUsername      string
	ReadonlyRootfs     bool
	SupplementalGroups []int64
	NoNewPrivs         bool
}

// ImageSpec mirrors runtimeapi.ImageSpec.
type ImageSpec struct {
	Image       string
	Annotations map[string]string
}

// ContainerConfig mirrors runtimeapi.ContainerConfig.
type ContainerConfig struct {
	Metadata    ContainerMetadata
	Image       ImageSpec
	Command     []string
	Args        []string
	WorkingDir  string
	Envs        []KeyValue
	Mounts      []Mount
	Labels      map[string]string
	Annotations map[string]string
	// LogPath is relative to the sandbox's LogDirectory.
	LogPath   string
	Stdin     bool
	StdinOnce bool
	Tty       bool
	// Linux
	Resources       *LinuxResources
	SecurityContext *ContainerSecurityContext
}

// Container mirrors runtimeapi.Container, an item of ListContainers.
type Container struct {
	ID           string
	PodSandboxID string
	Metadata     ContainerMetadata
	Image        string
	ImageRef     string
	State        ContainerState
	CreatedAt    time.Time
	Labels       map[string]string
	Annotations  map[string]string
}

// ContainerFilter mirrors runtimeapi.ContainerFilter. Zero fields do not filter.
type ContainerFilter struct {
	ID            string
	PodSandboxID  string
	State         *ContainerState
	LabelSelector map[string]string
}

// ContainerInfo mirrors runtimeapi.ContainerStatus: what the CRI's
// ContainerStatus call returns for one container instance.
type ContainerInfo struct {
	ID          string
	Metadata    ContainerMetadata
	State       ContainerState
	CreatedAt   time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	ExitCode    int32
	Image       string
	ImageRef    string
	Reason      string
	Message     string
	Labels      map[string]string
	Annotations map[string]string
	Mounts      []Mount
	LogPath     string
}

// Image mirrors runtimeapi.Image.
type Image struct {
	ID          string
	RepoTags    []string
	RepoDigests []string
	Size        uint64
}
