package schemas

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// The node service (docs/wire-protocol.md section 12): logs and exec of a
// node's containers, served by the node over NATS request/reply with the
// NATS service framework.
const (
	// NodeServiceName is the NATS service name every node registers.
	NodeServiceName = "jetlet"
	// Endpoint names of the node service.
	EndpointLogs = "logs"
	EndpointExec = "exec"
	// EndpointCordon sets the node's cordon, EndpointPlan answers with its
	// plan for an intent (docs/contract.md section 14).
	EndpointCordon = "cordon"
	EndpointPlan   = "plan"
)

// Headers of the log stream's messages.
const (
	// HeaderLogSeq numbers a log stream's chunks from 1.
	HeaderLogSeq = "Jetlet-Log-Seq"
	// HeaderLogCredit is the subject the client grants credit on.
	HeaderLogCredit = "Jetlet-Log-Credit"
	// HeaderLogEnd marks the end of a log stream; its value says why.
	HeaderLogEnd = "Jetlet-Log-End"
	// HeaderServiceError and HeaderServiceErrorCode are the NATS service
	// framework's error headers: a reply carrying them is an error.
	HeaderServiceError     = "Nats-Service-Error"
	HeaderServiceErrorCode = "Nats-Service-Error-Code"
)

// Why a log stream ended (HeaderLogEnd).
const (
	LogEndEOF    = "eof"    // everything asked for was sent
	LogEndExited = "exited" // a follow: the container exited and its log was read to the end
)

// Error codes of the node service's error replies, as HTTP's.
const (
	ServiceErrBadRequest  = 400 // the request does not decode or validate
	ServiceErrNotFound    = 404 // no such pod, container or previous instance
	ServiceErrConflict    = 409 // the container is not running (exec)
	ServiceErrTimeout     = 504 // exec: the command outlived its timeout
	ServiceErrInternal    = 500 // the runtime or the log files failed
	ServiceErrUnavailable = 503 // the node is shutting down
)

// Flow control of a log stream.
const (
	// LogChunkSize is the largest body of a log chunk.
	LogChunkSize = 64 << 10
	// DefaultLogWindow is how many chunks a client lets the node send ahead
	// of its credit when its request does not say.
	DefaultLogWindow = 16
	// LogKeepalive is how often a following client grants credit even
	// when nothing arrived, to say it is still there.
	LogKeepalive = 5 * time.Second
	// LogClientTimeout is how long the node waits for credit before it
	// decides the client went away and stops the stream.
	LogClientTimeout = 3 * LogKeepalive
)

// PodRef names a pod and one of its containers on the node.
type PodRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID narrows the pod to one incarnation; empty: the newest pod of
	// that namespace and name.
	UID string `json:"uid,omitempty"`
	// Container is the container's name; empty: the pod's only container.
	Container string `json:"container,omitempty"`
}

// LogsRequest asks a node for a container's log (jetlet logs).
type LogsRequest struct {
	PodRef
	Follow bool `json:"follow,omitempty"`
	// TailLines: only the last N lines; absent: all.
	TailLines *int64 `json:"tailLines,omitempty"`
	// SinceTime: only lines written at or after it.
	SinceTime *time.Time `json:"sinceTime,omitempty"`
	// Previous: the container's instance before the newest one.
	Previous   bool `json:"previous,omitempty"`
	Timestamps bool `json:"timestamps,omitempty"`
	// Window is how many chunks the node may send beyond the client's
	// credit; 0: DefaultLogWindow.
	Window int `json:"window,omitempty"`
}

// LogCredit is the body a client publishes on a stream's credit subject:
// it has consumed every chunk up to Seq.
type LogCredit struct {
	Seq int64 `json:"seq"`
}

// ExecRequest asks a node to run a command in a container (jetlet exec).
type ExecRequest struct {
	PodRef
	Command []string `json:"command"`
	// Timeout bounds the command; 0: none.
	TimeoutSeconds int64 `json:"timeoutSeconds,omitempty"`
}

// ExecResponse is a command's outcome. Stdout and stderr are
// base64-encoded in JSON.
type ExecResponse struct {
	Stdout   []byte `json:"stdout"`
	Stderr   []byte `json:"stderr"`
	ExitCode int32  `json:"exitCode"`
	// Truncated: the output was cut to fit the NATS server's max payload.
	Truncated bool `json:"truncated,omitempty"`
}

// PlanRequest asks a node for its plan for an intent of pod UID, as if it
// were delivered now (the reply is a PodPlan).
type PlanRequest struct {
	UID    string          `json:"uid"`
	Intent json.RawMessage `json:"intent"`
}

// CordonRequest cordons (Unschedulable) or uncordons the node: a cordoned
// node admits no new pod that does not tolerate
// node.kubernetes.io/unschedulable:NoSchedule, and leaves its pods be.
type CordonRequest struct {
	Unschedulable bool `json:"unschedulable"`
}

// CordonResponse is the node's cordon once the request is done; Changed is
// false when it was so already.
type CordonResponse struct {
	Node          string `json:"node"`
	Unschedulable bool   `json:"unschedulable"`
	Changed       bool   `json:"changed"`
}

// Validate checks the names of a pod reference.
func (r PodRef) Validate() error {
	switch {
	case r.Namespace == "" || r.Name == "":
		return invalidField("namespace", "namespace and name are required")
	case r.UID != "" && !ValidUID(r.UID):
		return invalidField("uid", strconv.Quote(r.UID)+" is not a valid pod uid")
	}
	return nil
}

// Validate checks a logs request.
func (r LogsRequest) Validate() error {
	if err := r.PodRef.Validate(); err != nil {
		return err
	}
	switch {
	case r.TailLines != nil && *r.TailLines < 0:
		return invalidField("tailLines", "must not be negative")
	case r.Window < 0:
		return invalidField("window", "must not be negative")
	case r.Follow && r.Previous:
		return invalidField("previous", "excludes follow: a previous instance no longer writes")
	}
	return nil
}

// Validate checks an exec request.
func (r ExecRequest) Validate() error {
	if err := r.PodRef.Validate(); err != nil {
		return err
	}
	switch {
	case len(r.Command) == 0 || strings.TrimSpace(r.Command[0]) == "":
		return invalidField("command", "is required")
	case r.TimeoutSeconds < 0:
		return invalidField("timeoutSeconds", "must not be negative")
	}
	return nil
}

// NodeService is the subject of one endpoint of a node's service.
func (s Subjects) NodeService(node, endpoint string) string {
	return s.NodeServiceGroup(node) + "." + endpoint
}

// NodeServiceGroup is the subject prefix of every endpoint of a node's
// service: <prefix>.node.<node>.
func (s Subjects) NodeServiceGroup(node string) string { return s.Prefix + ".node." + node }

// LogCredit is the credit subject of one log stream of a node.
func (s Subjects) LogCredit(node, stream string) string {
	return s.NodeServiceGroup(node) + ".credit." + stream
}

func invalidField(field, reason string) error {
	return &ValidationError{Kind: ErrInvalid, Field: field, Reason: reason}
}
