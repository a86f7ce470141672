package nodeservice

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/periodic"
	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/nodeservice/busstream"
	"github.com/jetlet/jetlet/schemas"
)

// Streamer is the CRI's streaming calls, with *runtime.Client's
// signatures: a Runtime that has them serves streams (exec with stdin and
// a terminal, attach, port-forward).
type Streamer interface {
	Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

// streamTarget is what a stream request resolved to on the node.
type streamTarget struct {
	instance
	url     string       // the runtime's streaming URL (exec, attach)
	forward *forwardConn // a port-forward's connection to the runtime
}

// release lets go of what the stream held: a port-forward's share of its
// session's connection.
func (t streamTarget) release() {
	if t.forward != nil {
		t.forward.release()
	}
}

// openStream resolves a stream request, asks the runtime for its
// streaming URL, tells the auditors, and serves the stream from a
// goroutine of its own.
func (s *Service) openStream(ctx context.Context, nc *nats.Conn, st Streamer, r micro.Request) {
	var req schemas.StreamRequest
	if err := json.Unmarshal(r.Data(), &req); err != nil {
		_ = respondError(r, replyErrorf(schemas.ServiceErrBadRequest, "stream request: %v", err))
		return
	}
	if err := req.Validate(); err != nil {
		_ = respondError(r, replyErrorf(schemas.ServiceErrBadRequest, "stream request: %v", err))
		return
	}
	id, reply := nuid.Next(), r.Reply()
	t, err := s.streamTarget(ctx, st, id, req)
	if err != nil {
		_ = respondError(r, err)
		return
	}
	if !s.serve(func() { defer t.release(); s.serveStream(ctx, nc, reply, id, req, t) }) {
		t.release()
		_ = respondError(r, errShuttingDown)
		return
	}
	if s.cfg.StreamOpened != nil {
		s.cfg.StreamOpened(ctx, streamEvent(id, req, t))
	}
}

// streamTarget finds the running container (the pod's sandbox for a
// port-forward) and gets the runtime's URL for the stream, or for a
// port-forward the session's connection to the runtime (stream id's own
// without a session).
func (s *Service) streamTarget(ctx context.Context, st Streamer, id string, req schemas.StreamRequest) (streamTarget, error) {
	var (
		t   streamTarget
		err error
	)
	if req.Kind == schemas.StreamPortForward {
		var cs []*runtimeapi.Container
		if cs, t.uid, err = s.newestPod(ctx, req.PodRef); err != nil {
			return t, err
		}
		t.pod, t.sandbox = req.Namespace+"/"+req.Name, cs[0].PodSandboxId
		key := forwardKey{session: cmp.Or(req.Session, id), sandbox: t.sandbox, port: req.Port}
		t.forward, err = s.forwards.acquire(key, func() (httpstream.Connection, error) {
			resp, err := st.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: t.sandbox, Port: []int32{req.Port}})
			if err != nil {
				return nil, streamRefused(err, "pod "+t.pod+"'s sandbox is not ready")
			}
			return dialPortForward(resp.GetUrl())
		})
		return t, err
	}
	if t.instance, err = s.resolve(ctx, req.PodRef, false); err != nil {
		return t, err
	}
	if t.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return t, replyErrorf(schemas.ServiceErrConflict, "container %s of pod %s is not running (%s)", t.name, t.pod, stateName(t.state))
	}
	gone := fmt.Sprintf("container %s of pod %s is not running", t.name, t.pod)
	if req.Kind == schemas.StreamExec {
		resp, err := st.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: t.id, Cmd: req.Command, Tty: req.TTY, Stdin: req.Stdin, Stdout: true, Stderr: !req.TTY})
		if err != nil {
			return t, streamRefused(err, gone)
		}
		t.url = resp.GetUrl()
		return t, nil
	}
	resp, err := st.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: t.id, Tty: req.TTY, Stdin: req.Stdin, Stdout: true, Stderr: !req.TTY})
	if err != nil {
		return t, streamRefused(err, gone)
	}
	t.url = resp.GetUrl()
	return t, nil
}

// streamRefused is the reply for the runtime's refusal of a stream.
func streamRefused(err error, gone string) error {
	switch {
	case errors.Is(err, crierr.ErrNotFound), errors.Is(err, crierr.ErrFailedPrecondition):
		return replyErrorf(schemas.ServiceErrConflict, "%s", gone)
	case errors.Is(err, crierr.ErrInvalidArgument):
		return replyErrorf(schemas.ServiceErrBadRequest, "%v", err)
	}
	return err
}

// streamEvent is the event that tells auditors a stream was opened: who
// it reached and how, never what it carries (an exec's command is left
// out too: its arguments may hold secrets).
func streamEvent(id string, req schemas.StreamRequest, t streamTarget) schemas.LifecycleEvent {
	ev := schemas.LifecycleEvent{
		ID: id + "." + string(schemas.EventStreamOpened), Type: schemas.EventStreamOpened,
		UID: t.uid, Namespace: req.Namespace, Pod: req.Name, Container: t.name, ContainerID: t.id, SandboxID: t.sandbox,
		Reason: req.Kind, Time: time.Now().UTC(),
	}
	var with []string
	if req.Stdin {
		with = append(with, "stdin")
	}
	if req.TTY {
		with = append(with, "a terminal")
	}
	switch {
	case req.Kind == schemas.StreamPortForward:
		ev.Message = "port-forward to port " + strconv.Itoa(int(req.Port))
	case len(with) > 0:
		ev.Message = req.Kind + " into container " + t.name + " with " + strings.Join(with, " and ")
	default:
		ev.Message = req.Kind + " into container " + t.name
	}
	return ev
}

// serveStream serves one open stream until it ends: the runtime's session
// ends (the exit frame), the client aborts or goes away, the bus breaks,
// or the node stops. It keeps nothing afterwards.
func (s *Service) serveStream(ctx context.Context, nc *nats.Conn, reply, id string, req schemas.StreamRequest, t streamTarget) {
	log := s.log.With().Str("pod", t.pod).Str("container", t.name).Str("stream", id).Str("kind", req.Kind).Logger()
	in := s.subj.StreamIn(s.cfg.Node, id)
	conn, err := busstream.Listen(ctx, nc, in, busstream.Config{Window: req.Window, PeerTimeout: s.cfg.ClientTimeout})
	if err != nil {
		_ = publishError(nc, reply, err)
		return
	}
	defer conn.Close()
	conn.SetPeer(reply)
	if err := conn.Open(in); err != nil {
		log.Debug().Err(err).Msg("stream not opened")
		return
	}
	log.Info().Msg("stream opened")
	var exit schemas.StreamExit
	if req.Kind == schemas.StreamPortForward {
		exit = portForwardOver(conn, t.forward, req.Port)
	} else {
		exit = s.remoteCommandOver(conn, t, req)
	}
	switch err := conn.Err(); {
	case err == nil:
		if err := conn.Send(schemas.FrameExit, 0, mustJSON(exit)); err != nil {
			log.Debug().Err(err).Msg("stream's exit not sent")
		}
		log.Info().Int32("exitCode", exit.ExitCode).Str("error", exit.Error).Msg("stream ended")
	case ctx.Err() != nil:
		conn.Abort(errShuttingDown)
		log.Info().Msg("stream stopped: the node is shutting down")
	default:
		if _, byClient := errors.AsType[*busstream.AbortError](err); !byClient {
			conn.Abort(err) // tell the client, if it can still hear
		}
		log.Info().Err(err).Msg("stream stopped")
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// remoteCommandOver joins conn to the runtime's exec or attach at t.url
// (remotecommand's SPDY client, as crictl's) until it ends.
func (s *Service) remoteCommandOver(conn *busstream.Conn, t streamTarget, req schemas.StreamRequest) schemas.StreamExit {
	u, err := url.Parse(t.url)
	if err != nil {
		return schemas.StreamExit{ExitCode: -1, Error: "the runtime's streaming URL: " + err.Error()}
	}
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		return schemas.StreamExit{ExitCode: -1, Error: err.Error()}
	}
	opts := remotecommand.StreamOptions{Stdout: conn.Writer(schemas.ChannelStdout), Tty: req.TTY}
	if !req.TTY {
		opts.Stderr = conn.Writer(schemas.ChannelStderr)
	}
	var stdin *io.PipeWriter
	if req.Stdin {
		var r *io.PipeReader
		r, stdin = io.Pipe()
		opts.Stdin = r
	}
	sizes := make(sizeQueue, 1)
	if req.TTY {
		opts.TerminalSizeQueue = sizes
	}
	ctx, stop := context.WithCancel(conn.Context())
	defer stop()
	var detached atomic.Bool // the client closed stdin
	go receiveInput(ctx, conn, stdin, sizes, &detached)
	err = ex.StreamWithContext(ctx, opts)
	if ee, ok := errors.AsType[utilexec.ExitError](err); ok {
		return schemas.StreamExit{ExitCode: int32(ee.ExitStatus())}
	}
	if err != nil {
		return schemas.StreamExit{ExitCode: -1, Error: err.Error()}
	}
	if req.Kind == schemas.StreamAttach && ctx.Err() == nil {
		return s.attachExit(ctx, t.id, detached.Load())
	}
	return schemas.StreamExit{}
}

// attachExitWait bounds how long an attach that ended without the
// client's detach waits for the runtime to see its container exited.
const attachExitWait = 5 * time.Second

// attachExit is an ended attach's exit: the container's exit code once it
// exited (the attach ends with it, a moment before the runtime records
// it), 0 for a client that detached.
func (s *Service) attachExit(ctx context.Context, id string, detached bool) schemas.StreamExit {
	var exit schemas.StreamExit
	check := func() bool {
		st, err := s.rt.ContainerStatus(ctx, id, false)
		if err != nil || st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return false
		}
		exit.ExitCode = st.GetStatus().GetExitCode()
		return true
	}
	if check() || detached {
		return exit
	}
	ctx, stop := context.WithTimeout(ctx, attachExitWait)
	defer stop()
	periodic.Every(ctx, attachExitPoll, func() {
		if check() {
			stop()
		}
	})
	return exit
}

// attachExitPoll is how often attachExit asks.
const attachExitPoll = 50 * time.Millisecond

// receiveInput takes the client's frames: stdin into the pipe (its
// write returns once the runtime read it: a slow command holds the
// client back), stdin's close closes the pipe, resizes go to sizes.
func receiveInput(ctx context.Context, conn *busstream.Conn, stdin *io.PipeWriter, sizes sizeQueue, detached *atomic.Bool) {
	defer close(sizes)
	for {
		f, err := conn.Recv()
		if err != nil {
			if stdin != nil {
				stdin.CloseWithError(err)
			}
			return
		}
		switch {
		case f.Kind == schemas.FrameData && f.Channel == schemas.ChannelStdin && stdin != nil:
			if _, err := stdin.Write(f.Data); err != nil {
				stdin = nil // the command closed its stdin: drop the rest
			}
		case f.Kind == schemas.FrameClose && f.Channel == schemas.ChannelStdin && stdin != nil:
			detached.Store(true)
			stdin.Close()
			stdin = nil
		case f.Kind == schemas.FrameResize:
			var sz schemas.TerminalSize
			if json.Unmarshal(f.Data, &sz) == nil {
				sizes.put(ctx, remotecommand.TerminalSize{Width: sz.Width, Height: sz.Height})
			}
		}
	}
}

// sizeQueue is a terminal's sizes for remotecommand: the latest one
// replaces one not yet taken.
type sizeQueue chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	sz, ok := <-q
	if !ok {
		return nil
	}
	return &sz
}

func (q sizeQueue) put(ctx context.Context, sz remotecommand.TerminalSize) {
	select {
	case <-q:
	default:
	}
	select {
	case q <- sz:
	case <-ctx.Done():
	}
}
