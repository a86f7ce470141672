package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/jetlet/jetlet/runtime/crierr"
)

// streamAddress is where the streaming server listens: loopback on a port the
// kernel picks, as containerd's stream_server_address default. Its URLs carry
// the library's tokens (random, single use, valid for a minute), which are the
// only authentication: whoever may call the CRI socket may stream.
const streamAddress = "127.0.0.1:0"

// streamServer serves the URLs Exec, Attach and PortForward return: kubelet's
// CRI streaming library (SPDY and WebSocket, as kubelet's and crictl's clients
// speak them) over HTTP.
type streamServer struct {
	addr string // host:port
	urls streaming.Server
	http *http.Server
}

// startStreaming listens on streamAddress and serves in the background.
func (r *Runtime) startStreaming() (*streamServer, error) {
	lis, err := net.Listen("tcp", streamAddress)
	if err != nil {
		return nil, fmt.Errorf("proc: streaming server: %w", err)
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = lis.Addr().String()
	cfg.BaseURL = &url.URL{Scheme: "http", Host: cfg.Addr}
	urls, err := streaming.NewServer(cfg, streamer{r})
	if err != nil {
		lis.Close()
		return nil, fmt.Errorf("proc: streaming server: %w", err)
	}
	s := &streamServer{addr: cfg.Addr, urls: urls, http: &http.Server{Handler: urls, ReadHeaderTimeout: 30 * time.Second}}
	go func() {
		if err := s.http.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error().Err(err).Msg("streaming server stopped")
		}
	}()
	return s, nil
}

// Exec returns the URL of a streaming exec in a running container.
func (r *Runtime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, errorf(crierr.ErrInvalidArgument, "exec command is empty")
	}
	if _, _, err := r.runningContainer(req.GetContainerId()); err != nil {
		return nil, err
	}
	return r.stream.urls.GetExec(req)
}

// Attach returns the URL of an attach to a running container.
func (r *Runtime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if _, _, err := r.runningContainer(req.GetContainerId()); err != nil {
		return nil, err
	}
	return r.stream.urls.GetAttach(req)
}

// PortForward returns the URL of a port forward into a ready sandbox.
func (r *Runtime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	s, err := r.getSandbox(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	r.mu.RLock()
	ready := s.ready
	r.mu.RUnlock()
	if !ready {
		return nil, errorf(crierr.ErrFailedPrecondition, "sandbox %s is not ready", s.id)
	}
	return r.stream.urls.GetPortForward(req)
}

// streamer is the runtime as the streaming library calls it, once a client
// has connected to a URL.
type streamer struct{ r *Runtime }

var _ streaming.Runtime = streamer{}

func (s streamer) Exec(ctx context.Context, containerID string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	return s.r.execStreaming(ctx, containerID, cmd, in, out, errOut, tty, resize)
}

func (s streamer) Attach(ctx context.Context, containerID string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	return s.r.attach(ctx, containerID, in, out, errOut, resize)
}

func (s streamer) PortForward(ctx context.Context, podSandboxID string, port int32, stream io.ReadWriteCloser) error {
	return s.r.portForward(podSandboxID, port, stream)
}

// clientWriter is a client's output stream: the first failed write (the
// client is gone) calls hangUp.
type clientWriter struct {
	w      io.Writer
	hangUp context.CancelFunc
}

func (c clientWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		c.hangUp()
	}
	return n, err
}
