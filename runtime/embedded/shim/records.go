package shim

// State is a container directory's shim.json, written by the pod shim once
// the container's command runs.
type State struct {
	ShimPID   int    `json:"shim_pid"` // the pod shim, in the runtime's pid namespace
	PID       int    `json:"pid"`      // the command, in the runtime's pid namespace
	StartedAt int64  `json:"started_at"`
	UID       uint32 `json:"uid"`
	GID       uint32 `json:"gid"`
	// Groups are the command's supplementary groups (ContainerStatus's
	// user).
	Groups []uint32 `json:"groups,omitempty"`
}

// Exit is a container directory's exit.json, written by the pod shim when the
// command has exited (or failed to start), or by the runtime when a shim
// vanished without writing it.
type Exit struct {
	ExitCode   int32  `json:"exit_code"`
	FinishedAt int64  `json:"finished_at"`
	Reason     string `json:"reason,omitempty"`
	Message    string `json:"message,omitempty"`
}

const (
	// ReasonStartError is containerd's reason when a task cannot start, with
	// exit code StartErrorCode.
	ReasonStartError = "StartError"
	StartErrorCode   = 128
	// ReasonUnknown and LostCode mark an exit nobody saw (the shim died).
	ReasonUnknown = "Unknown"
	LostCode      = 255
)

// PodSpec is a sandbox directory's pod.json: how the pod shim sets up the
// namespaces the runtime started it in.
type PodSpec struct {
	// Hostname is set in the pod's UTS namespace; empty when the pod shares
	// the host's (never set then).
	Hostname string `json:"hostname,omitempty"`
	// Sysctls are written under /proc/sys in the pod's namespaces; the runtime
	// admits only those the pod's own namespaces scope.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// SharedPIDs gives the pod one pid namespace its containers share (the
	// CRI's NamespaceMode POD), held by a pause (see modePause); the shim
	// stays out of it.
	SharedPIDs bool `json:"shared_pids,omitempty"`
}
