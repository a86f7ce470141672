package schemas

import (
	"strconv"
	"strings"
	"time"
)

// Streams of the node service (docs/wire-protocol.md section 12, Streams):
// exec with stdin and a terminal, attach and port-forward, carried over
// NATS as numbered frames with credit, in both directions.

// EndpointStream opens a stream (the operator's alone).
const EndpointStream = "stream"

// What a stream joins on the node (StreamRequest.Kind).
const (
	StreamExec        = "exec"
	StreamAttach      = "attach"
	StreamPortForward = "portforward"
)

// Headers of a stream's messages.
const (
	// HeaderStreamFrame is a message's kind (Frame*).
	HeaderStreamFrame = "Jetlet-Stream-Frame"
	// HeaderStreamSeq numbers a direction's frames that take credit, from 1
	// (the node's opening is 0).
	HeaderStreamSeq = "Jetlet-Stream-Seq"
	// HeaderStreamChannel is a data or close frame's channel (Channel*).
	HeaderStreamChannel = "Jetlet-Stream-Channel"
	// HeaderStreamAck is a credit frame's: every frame up to it was consumed.
	HeaderStreamAck = "Jetlet-Stream-Ack"
	// HeaderStreamSubject is the opening's: where the client sends.
	HeaderStreamSubject = "Jetlet-Stream-Subject"
	// HeaderStreamError is an abort's reason.
	HeaderStreamError = "Jetlet-Stream-Error"
)

// Frames. open, data, close, resize and exit are numbered and take credit;
// credit, ping and abort are not.
const (
	FrameOpen   = "open"   // node: the stream is open (seq 0)
	FrameData   = "data"   // bytes on a channel
	FrameClose  = "close"  // a channel's end (half-close)
	FrameResize = "resize" // client: the terminal's size, a TerminalSize
	FrameExit   = "exit"   // node: the end, a StreamExit
	FrameCredit = "credit" // frames up to HeaderStreamAck were consumed
	FramePing   = "ping"   // keepalive
	FrameAbort  = "abort"  // the sender stopped, HeaderStreamError says why
)

// Channels of data and close frames, as the CRI's remotecommand numbers
// them; a port-forward's bytes to the port are ChannelStdin, from it
// ChannelStdout.
const (
	ChannelStdin  = 0
	ChannelStdout = 1
	ChannelStderr = 2
)

// Flow control of a stream.
const (
	// StreamFrameSize is the largest body of a data frame.
	StreamFrameSize = 64 << 10
	// DefaultStreamWindow is how many frames a side may send beyond the
	// other's credit when the request does not say: 1 MiB of data.
	DefaultStreamWindow = 16
	// MaxStreamWindow bounds a request's window (what each side buffers).
	MaxStreamWindow = 256
	// MaxStreamSession bounds a port-forward's session id.
	MaxStreamSession = 64
	// StreamKeepalive is how often each side pings; StreamPeerTimeout how
	// long it waits to hear anything before it ends the stream.
	StreamKeepalive   = 5 * time.Second
	StreamPeerTimeout = 3 * StreamKeepalive
)

// StreamRequest opens a stream into a container (exec, attach) or a pod's
// network namespace (portforward).
type StreamRequest struct {
	PodRef
	Kind string `json:"kind"`
	// Command is an exec's.
	Command []string `json:"command,omitempty"`
	// Stdin: the client sends standard input. TTY: a terminal (stdout and
	// stderr are one).
	Stdin bool `json:"stdin,omitempty"`
	TTY   bool `json:"tty,omitempty"`
	// Port is a port-forward's port in the pod.
	Port int32 `json:"port,omitempty"`
	// Window is how many frames each side may send beyond the other's
	// credit; 0: DefaultStreamWindow.
	Window int `json:"window,omitempty"`
	// Session groups a client's port-forward streams to one port of a
	// pod: the node carries them on one connection to the runtime. The
	// client picks it (a random id, one per port-forward command); none:
	// a connection of the stream's own.
	Session string `json:"session,omitempty"`
}

// TerminalSize is a resize frame's body.
type TerminalSize struct {
	Width  uint16 `json:"width"`
	Height uint16 `json:"height"`
}

// StreamExit is the exit frame's body: the command's exit code (exec; an
// attach's container's, once it exited), or why the stream failed.
type StreamExit struct {
	ExitCode int32  `json:"exitCode"`
	Error    string `json:"error,omitempty"`
}

// sessionChars are those of a session id.
const sessionChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

// Validate checks a stream request.
func (r StreamRequest) Validate() error {
	if err := r.PodRef.Validate(); err != nil {
		return err
	}
	switch {
	case r.Window < 0 || r.Window > MaxStreamWindow:
		return invalidField("window", "must be between 0 and "+strconv.Itoa(MaxStreamWindow))
	case r.Kind == StreamExec && (len(r.Command) == 0 || strings.TrimSpace(r.Command[0]) == ""):
		return invalidField("command", "is required")
	case r.Kind != StreamExec && len(r.Command) > 0:
		return invalidField("command", "is an exec's")
	case r.Kind == StreamPortForward && (r.Port < 1 || r.Port > 65535):
		return invalidField("port", "must be between 1 and 65535")
	case r.Kind == StreamPortForward && (r.Stdin || r.TTY || r.Container != ""):
		return invalidField("kind", "a port-forward has no stdin, terminal or container")
	case r.Kind != StreamPortForward && r.Port != 0:
		return invalidField("port", "is a port-forward's")
	case r.Kind != StreamPortForward && r.Session != "":
		return invalidField("session", "is a port-forward's")
	case len(r.Session) > MaxStreamSession || strings.Trim(r.Session, sessionChars) != "":
		return invalidField("session", "must be at most "+strconv.Itoa(MaxStreamSession)+" letters, digits, '-' or '_'")
	case r.Kind != StreamExec && r.Kind != StreamAttach && r.Kind != StreamPortForward:
		return invalidField("kind", strconv.Quote(r.Kind)+" is none of exec, attach, portforward")
	}
	return nil
}

// StreamIn is the subject the client sends a stream's frames on.
func (s Subjects) StreamIn(node, stream string) string {
	return s.NodeService(node, EndpointStream) + "." + stream
}
