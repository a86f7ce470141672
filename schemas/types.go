// Package schemas holds jetlet's wire types (docs/contract.md sections 3 to 6), their
// JSON Schemas and the decode-and-validate entry point for intents. It is the leaf
// of the module: it imports nothing of ours.
package schemas

import (
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// APIVersion is the apiVersion of every jetlet message.
const APIVersion = "jetlet.dev/v1"

// Kinds of jetlet messages.
const (
	KindPodIntent      = "PodIntent"
	KindSyncResult     = "SyncResult"
	KindLifecycleEvent = "LifecycleEvent"
	KindNode           = "Node"
)

// Op is what an intent asks of the node.
type Op string

const (
	OpApply  Op = "apply"
	OpDelete Op = "delete"
)

// PodIntent is a scheduler's desired state for one pod on one node.
type PodIntent struct {
	APIVersion         string      `json:"apiVersion"`
	Kind               string      `json:"kind"`
	Op                 Op          `json:"op,omitempty"`
	Revision           int64       `json:"revision,omitempty"`
	GracePeriodSeconds *int64      `json:"gracePeriodSeconds,omitempty"`
	Pod                *corev1.Pod `json:"pod"`
}

// Outcome says how an intent was settled.
type Outcome string

const (
	OutcomeSynced     Outcome = "Synced"
	OutcomeFailed     Outcome = "Failed"
	OutcomeRejected   Outcome = "Rejected"
	OutcomeSuperseded Outcome = "Superseded"
	OutcomeStale      Outcome = "Stale"
)

// Action names used in SyncResult.actions, after kubelet's SyncAction.
const (
	ActionCreatePodSandbox = "CreatePodSandbox"
	ActionKillPodSandbox   = "KillPodSandbox"
	ActionRemovePodSandbox = "RemovePodSandbox"
	ActionStartContainer   = "StartContainer"
	ActionKillContainer    = "KillContainer"
	ActionInitContainer    = "InitContainer"
	ActionPullImage        = "PullImage"
	// ActionUpdateContainerResources resizes a running container in place
	// (the CRI's UpdateContainerResources); the message says what changed.
	ActionUpdateContainerResources = "UpdateContainerResources"
	// ActionUpdatePodSandboxResources resizes the pod's cgroup in place
	// (pod-level resources, the CRI's UpdatePodSandboxResources; target the
	// pod's uid); the message says what changed.
	ActionUpdatePodSandboxResources = "UpdatePodSandboxResources"
)

// ActionResult is the outcome of one action of a sync.
type ActionResult struct {
	Action  string `json:"action"`
	Target  string `json:"target"`
	Error   string `json:"error"`
	Message string `json:"message"`
}

// SyncResult answers exactly one intent.
type SyncResult struct {
	APIVersion string  `json:"apiVersion"`
	Kind       string  `json:"kind"`
	Node       string  `json:"node"`
	UID        string  `json:"uid"`
	Namespace  string  `json:"namespace"`
	Name       string  `json:"name"`
	IntentSeq  uint64  `json:"intentSeq"`
	Revision   int64   `json:"revision"`
	Op         Op      `json:"op"`
	Outcome    Outcome `json:"outcome"`
	Error      string  `json:"error"`
	// Reason is kubelet's word for why admission refused the pod
	// (OutOfmemory, NodeAffinity, PodSecurity, ...), with outcome Rejected.
	Reason     string         `json:"reason,omitempty"`
	Actions    []ActionResult `json:"actions"`
	Status     *PodStatus     `json:"status,omitempty"`
	ReceivedAt time.Time      `json:"receivedAt"`
	FinishedAt time.Time      `json:"finishedAt"`
}

// EventType is the type of a LifecycleEvent; it is also the last subject token.
type EventType string

const (
	EventSandboxCreated   EventType = "SandboxCreated"
	EventSandboxStopped   EventType = "SandboxStopped"
	EventSandboxRemoved   EventType = "SandboxRemoved"
	EventContainerCreated EventType = "ContainerCreated"
	EventContainerStarted EventType = "ContainerStarted"
	EventContainerDied    EventType = "ContainerDied"
	EventContainerKilled  EventType = "ContainerKilled"
	EventContainerRemoved EventType = "ContainerRemoved"
	EventBackOff          EventType = "BackOff"
	EventImagePulled      EventType = "ImagePulled"
	EventImagePullFailed  EventType = "ImagePullFailed"
	EventUnhealthy        EventType = "Unhealthy"
	EventPodTerminated    EventType = "PodTerminated"
	EventIntentRejected   EventType = "IntentRejected"
	// A postStart hook failed: the container is killed.
	EventFailedPostStartHook EventType = "FailedPostStartHook"
	// A preStop hook failed: the kill goes on.
	EventFailedPreStopHook EventType = "FailedPreStopHook"
	// A configMap, secret, downwardAPI or projected volume could not be
	// written (its object or key missing): the pod waits.
	EventFailedMount EventType = "FailedMount"
	// envFrom keys that are no valid environment variable names were
	// skipped.
	EventInvalidEnvironmentVariableNames EventType = "InvalidEnvironmentVariableNames"
	// A ClusterFirst pod fell back to the node's DNS: the node has no
	// cluster DNS (--cluster-dns).
	EventMissingClusterDNS EventType = "MissingClusterDNS"
	// The pod's DNS config was cut to the resolver's limits.
	EventDNSConfigForming EventType = "DNSConfigForming"
	// In-place resize, kubelet's events: the node took the new resources
	// (ResizeStarted) and the runtime applied them (ResizeCompleted); they
	// do not fit now (ResizeDeferred, retried when resources free) or ever
	// (ResizeInfeasible); the runtime could not apply them (ResizeError).
	EventResizeStarted    EventType = "ResizeStarted"
	EventResizeCompleted  EventType = "ResizeCompleted"
	EventResizeDeferred   EventType = "ResizeDeferred"
	EventResizeInfeasible EventType = "ResizeInfeasible"
	EventResizeError      EventType = "ResizeError"
	// An operator opened a stream (exec, attach, port-forward) into the
	// pod: that it was opened, never what it carries.
	EventStreamOpened EventType = "StreamOpened"
)

// EventTypes lists every event type, in the contract's order.
var EventTypes = []EventType{
	EventSandboxCreated, EventSandboxStopped, EventSandboxRemoved,
	EventContainerCreated, EventContainerStarted, EventContainerDied,
	EventContainerKilled, EventContainerRemoved, EventBackOff,
	EventImagePulled, EventImagePullFailed, EventUnhealthy,
	EventPodTerminated, EventIntentRejected,
	EventFailedPostStartHook, EventFailedPreStopHook,
	EventFailedMount, EventInvalidEnvironmentVariableNames,
	EventMissingClusterDNS, EventDNSConfigForming,
	EventResizeStarted, EventResizeCompleted, EventResizeDeferred,
	EventResizeInfeasible, EventResizeError, EventStreamOpened,
}

// Reasons carried by ContainerDied and ContainerKilled events.
const (
	ReasonCompleted = "Completed"
	// ReasonEvicted: node-pressure eviction killed the pod, and its phase is
	// Failed for good.
	ReasonEvicted       = "Evicted"
	ReasonError         = "Error"
	ReasonOOMKilled     = "OOMKilled"
	ReasonSpecChanged   = "SpecChanged"
	ReasonLivenessProbe = "LivenessProbe"
	ReasonStartupProbe  = "StartupProbe"
	ReasonPodDeleted    = "PodDeleted"
	ReasonOrphaned      = "Orphaned" // a pod the node has no intent for
	ReasonUnknown       = "Unknown"
	// ReasonDeadlineExceeded: the pod ran past its activeDeadlineSeconds (also
	// the reason of the pod's Failed status).
	ReasonDeadlineExceeded    = "DeadlineExceeded"
	ReasonFailedPostStartHook = "FailedPostStartHook"
)

// ProbeKind says which probe an Unhealthy event is about.
type ProbeKind string

const (
	ProbeLiveness  ProbeKind = "Liveness"
	ProbeReadiness ProbeKind = "Readiness"
	ProbeStartup   ProbeKind = "Startup"
)

// LifecycleEvent is one container or sandbox fact, for audit.
type LifecycleEvent struct {
	APIVersion  string    `json:"apiVersion"`
	Kind        string    `json:"kind"`
	ID          string    `json:"id"`
	Type        EventType `json:"type"`
	Node        string    `json:"node"`
	UID         string    `json:"uid"`
	Namespace   string    `json:"namespace"`
	Pod         string    `json:"pod"`
	Container   string    `json:"container,omitempty"`
	ContainerID string    `json:"containerId,omitempty"`
	SandboxID   string    `json:"sandboxId,omitempty"`
	Attempt     uint32    `json:"attempt"`
	ExitCode    *int32    `json:"exitCode,omitempty"`
	Reason      string    `json:"reason,omitempty"`
	Message     string    `json:"message,omitempty"`
	// Probe is set on Unhealthy events.
	Probe     ProbeKind `json:"probe,omitempty"`
	Time      time.Time `json:"time"`
	IntentSeq uint64    `json:"intentSeq,omitempty"`
	Revision  int64     `json:"revision,omitempty"`
}

// PodPhase follows Kubernetes, plus Terminating and Terminated for deletes.
type PodPhase string

const (
	PhasePending     PodPhase = "Pending"
	PhaseRunning     PodPhase = "Running"
	PhaseSucceeded   PodPhase = "Succeeded"
	PhaseFailed      PodPhase = "Failed"
	PhaseTerminating PodPhase = "Terminating"
	PhaseTerminated  PodPhase = "Terminated"
)

// SandboxState mirrors the CRI sandbox states.
type SandboxState string

const (
	SandboxReady    SandboxState = "Ready"
	SandboxNotReady SandboxState = "NotReady"
)

// ContainerState mirrors the CRI container states.
type ContainerState string

const (
	ContainerCreated ContainerState = "Created"
	ContainerRunning ContainerState = "Running"
	ContainerExited  ContainerState = "Exited"
	ContainerUnknown ContainerState = "Unknown"
	// ContainerWaiting is a container that has no instance yet, or is backing off.
	ContainerWaiting ContainerState = "Waiting"
)

// SandboxStatus is the pod's newest sandbox.
type SandboxStatus struct {
	ID    string       `json:"id"`
	State SandboxState `json:"state"`
	IPs   []string     `json:"ips"`
}

// ContainerStatus is one container of a PodStatus.
type ContainerStatus struct {
	Name         string         `json:"name"`
	ContainerID  string         `json:"containerId"`
	Image        string         `json:"image"`
	State        ContainerState `json:"state"`
	Reason       string         `json:"reason"`
	Message      string         `json:"message,omitempty"`
	ExitCode     int32          `json:"exitCode"`
	RestartCount int32          `json:"restartCount"`
	StartedAt    string         `json:"startedAt"`
	FinishedAt   string         `json:"finishedAt"`
	// Ready: running and its readiness probe (if any) passed.
	Ready bool `json:"ready"`
	// Started: running and its startup probe (if any) passed.
	Started bool `json:"started"`
	// LastState is how the previous instance ended, if there was one.
	LastState *LastState `json:"lastState,omitempty"`
	// Resources are what the runtime applied to the running instance
	// (kubelet's status.containerStatuses[].resources): cpu request and
	// limits read back from it, the memory request allocated (cgroups hold
	// none). Absent when the runtime reports none.
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// AllocatedResources are the requests the node admitted for the
	// container: the spec's, or the previous ones while a resize is
	// pending.
	AllocatedResources corev1.ResourceList `json:"allocatedResources,omitempty"`
}

// LastState is the termination of a container's previous instance.
type LastState struct {
	ExitCode   int32  `json:"exitCode"`
	Reason     string `json:"reason"`
	FinishedAt string `json:"finishedAt"`
	Message    string `json:"message,omitempty"`
}

// PodConditionType names a pod condition, as Kubernetes.
type PodConditionType string

const (
	PodInitialized     PodConditionType = "Initialized"
	PodContainersReady PodConditionType = "ContainersReady"
	PodReady           PodConditionType = "Ready"
	// PodResizePending: a resize the node has not taken, with reason
	// Infeasible or Deferred (kubelet's).
	PodResizePending PodConditionType = "PodResizePending"
	// PodResizeInProgress: a resize taken and not yet applied by the
	// runtime; reason Error when applying it failed.
	PodResizeInProgress PodConditionType = "PodResizeInProgress"
)

// ReasonResizeError is the PodResizeInProgress condition's reason when the
// runtime could not apply a resize, kubelet's. (PodResizePending's reasons
// are admission's: Infeasible, Deferred.)
const ReasonResizeError = "Error"

// ConditionStatus is "True" or "False".
type ConditionStatus string

const (
	ConditionTrue  ConditionStatus = "True"
	ConditionFalse ConditionStatus = "False"
)

// PodCondition is one of the pod's conditions.
type PodCondition struct {
	Type               PodConditionType `json:"type"`
	Status             ConditionStatus  `json:"status"`
	Reason             string           `json:"reason,omitempty"`
	Message            string           `json:"message,omitempty"`
	LastTransitionTime time.Time        `json:"lastTransitionTime"`
}

// PodStatus is the latest status of one pod, kept in the jetlet_status bucket.
type PodStatus struct {
	UID       string   `json:"uid"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Node      string   `json:"node"`
	Revision  int64    `json:"revision"`
	IntentSeq uint64   `json:"intentSeq"`
	Phase     PodPhase `json:"phase"`
	// Reason says why the phase is what it is (DeadlineExceeded, Evicted or
	// an admission refusal's reason with Failed); Message says more.
	Reason         string            `json:"reason,omitempty"`
	Message        string            `json:"message,omitempty"`
	Conditions     []PodCondition    `json:"conditions,omitempty"`
	Sandbox        *SandboxStatus    `json:"sandbox"`
	InitContainers []ContainerStatus `json:"initContainers"`
	Containers     []ContainerStatus `json:"containers"`
	ObservedAt     time.Time         `json:"observedAt"`
}

// PodCounts summarises the pods of a node by phase.
type PodCounts struct {
	Total   int              `json:"total"`
	ByPhase map[PodPhase]int `json:"byPhase"`
}

// IsolationLevel is how far the embedded runtime isolates pods from the host.
type IsolationLevel string

const (
	IsolationFull    IsolationLevel = "full"    // every namespace, mounts, users, capabilities
	IsolationPartial IsolationLevel = "partial" // the kernel refused some namespaces
	IsolationNone    IsolationLevel = "none"    // not root: pods are host processes
)

// NodeRecord is the heartbeat kept in the jetlet_nodes bucket, key <node>.
type NodeRecord struct {
	APIVersion        string `json:"apiVersion"`
	Kind              string `json:"kind"`
	Node              string `json:"node"`
	JetletVersion     string `json:"jetletVersion"`
	RuntimeName       string `json:"runtimeName"`
	RuntimeVersion    string `json:"runtimeVersion"`
	RuntimeAPIVersion string `json:"runtimeApiVersion"`
	RuntimeEndpoint   string `json:"runtimeEndpoint"`
	// Isolation is how far the embedded runtime isolates pods from the host;
	// empty with another CRI runtime.
	Isolation IsolationLevel `json:"isolation,omitempty"`
	Pods      PodCounts      `json:"pods"`

	// The node's status in Kubernetes' Node shapes (docs/contract.md section 12),
	// what a scheduler places pods with.
	Labels        map[string]string   `json:"labels,omitempty"`
	Taints        []corev1.Taint      `json:"taints,omitempty"`
	Unschedulable bool                `json:"unschedulable"`
	Capacity      corev1.ResourceList `json:"capacity,omitempty"`
	// Swap is the machine's swap (Kubernetes' status.nodeInfo.swap): its
	// capacity in bytes, 0 without swap.
	Swap *corev1.NodeSwapStatus `json:"swap,omitempty"`
	// Allocatable is Capacity less --kube-reserved, --system-reserved and
	// the hard eviction thresholds, as kubelet computes it.
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Allocated is the sum of the requests of the admitted pods that are
	// not terminal, and their count as pods.
	Allocated corev1.ResourceList `json:"allocated,omitempty"`
	// Usage is what the node uses now, as kubectl top nodes shows it: cpu
	// over the window since the previous record, memory its working set
	// (docs/node.md); cpu is absent from the first record (a rate needs
	// two samples).
	Usage      corev1.ResourceList     `json:"usage,omitempty"`
	Conditions []NodeCondition         `json:"conditions,omitempty"`
	Addresses  []corev1.NodeAddress    `json:"addresses,omitempty"`
	Images     []corev1.ContainerImage `json:"images,omitempty"`
	// DeclaredFeatures is Kubernetes' node status.declaredFeatures
	// (KEP-5328): the features the node has, named as kubelet names them
	// (k8s.io/component-helpers/nodedeclaredfeatures), sorted, which a
	// scheduler matches against what a pod needs. Empty: none.
	DeclaredFeatures []string `json:"declaredFeatures,omitempty"`
	// XKey is the node's curve public key, which Secrets are sealed for
	// (docs/contract.md section 11).
	XKey string `json:"xkey,omitempty"`

	StartedAt   time.Time       `json:"startedAt"`
	HeartbeatAt time.Time       `json:"heartbeatAt"`
	Extra       json.RawMessage `json:"extra,omitempty"`
}

// KindSealedSecret is the kind of a SealedSecret.
const KindSealedSecret = "SealedSecret"

// SealedSecret is a core/v1 Secret sealed for one node, the value of its key
// <node>.<namespace>.<name> in jetlet_secrets (docs/contract.md section 11): the
// Secret's JSON sealed with nkeys' curve Seal for the node's xkey by the
// sender's key; only the node's seed opens it.
type SealedSecret struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Node       string `json:"node"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	// Sender is the curve public key (X...) the Secret was sealed with.
	Sender string `json:"sender"`
	// Sealed is the base64 of the sealed bytes.
	Sealed string `json:"sealed"`
}

// NodeCondition is one of the node's conditions (Ready, MemoryPressure,
// DiskPressure, PIDPressure, NetworkUnavailable), as Kubernetes' NodeCondition without its
// heartbeat time (the record's heartbeatAt says it).
type NodeCondition struct {
	Type               corev1.NodeConditionType `json:"type"`
	Status             corev1.ConditionStatus   `json:"status"`
	Reason             string                   `json:"reason,omitempty"`
	Message            string                   `json:"message,omitempty"`
	LastTransitionTime time.Time                `json:"lastTransitionTime"`
}
