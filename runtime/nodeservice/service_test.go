package nodeservice_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/nodeservice"
	"github.com/jetlet/jetlet/runtime/nodeservice/nodeclient"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// podRuntime holds containers whose logs are real files, for the pure
// logic the service adds over the CRI; the CRI end to end is in
// cmd/jetlet's tests. Its lock guards containers.
type podRuntime struct {
	mu         sync.Mutex
	containers []*runtimeapi.Container
	logs       map[string]string // container id: log path
}

func (r *podRuntime) add(t *testing.T, uid, name string, created int64, state runtimeapi.ContainerState) (id, logPath string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	id = fmt.Sprintf("%s-%s-%d", uid, name, created)
	logPath = filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(logPath, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	r.containers = append(r.containers, &runtimeapi.Container{
		Id: id, PodSandboxId: "sandbox-" + uid, CreatedAt: created, State: state, Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Labels: map[string]string{
			"io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.name": "web",
			"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": name,
		},
	})
	if r.logs == nil {
		r.logs = map[string]string{}
	}
	r.logs[id] = logPath
	return id, logPath
}

func (r *podRuntime) setState(id string, state runtimeapi.ContainerState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.containers {
		if c.Id == id {
			c.State = state
		}
	}
}

func (r *podRuntime) ListContainers(_ context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Container
next:
	for _, c := range r.containers {
		for k, v := range f.GetLabelSelector() {
			if c.Labels[k] != v {
				continue next
			}
		}
		out = append(out, proto.CloneOf(c))
	}
	return out, nil
}

func (r *podRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.containers {
		if c.Id == id {
			return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: c.State, LogPath: r.logs[id]}}, nil
		}
	}
	return nil, crierr.ErrNotFound
}

// ExecSync runs "echo ARGS" and "exit N"; "sleep" outlives any timeout.
func (r *podRuntime) ExecSync(_ context.Context, _ string, cmd []string, timeout time.Duration) (*runtimeapi.ExecSyncResponse, error) {
	switch cmd[0] {
	case "echo":
		return &runtimeapi.ExecSyncResponse{Stdout: []byte(strings.Join(cmd[1:], " ") + "\n")}, nil
	case "exit":
		return &runtimeapi.ExecSyncResponse{Stderr: []byte("bye\n"), ExitCode: 3}, nil
	default:
		return nil, crierr.ErrDeadlineExceeded
	}
}

var subj = schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}

// serve runs the node service of node n1 on an embedded NATS server and
// returns a client connection.
func serve(t *testing.T, rt nodeservice.Runtime, cfg nodeservice.Config) (*nodeservice.Service, *nats.Conn) {
	t.Helper()
	srv := natstest.RunServer(t)
	nc, _ := natstest.Connect(t, srv)
	cfg.Node, cfg.Logger = "n1", zerolog.Nop()
	if cfg.ExitPoll == 0 {
		cfg.ExitPoll = 10 * time.Millisecond
	}
	svc, err := nodeservice.New(rt, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx, nc) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	client, _ := natstest.Connect(t, srv)
	poll.Until(t, 10*time.Second, poll.Msg("the service's endpoints"), func() bool {
		_, err := nodeclient.Exec(t.Context(), client, subj, "n1", schemas.ExecRequest{PodRef: schemas.PodRef{Namespace: "x", Name: "y"}, Command: []string{"true"}})
		return !errors.Is(err, nodeclient.ErrNoNode)
	})
	return svc, client
}

func appendLog(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := fmt.Fprintf(f, "%s stdout F %s\n", time.Now().UTC().Format(time.RFC3339Nano), l); err != nil {
			t.Fatal(err)
		}
	}
}

func wantCode(t *testing.T, err error, code int) {
	t.Helper()
	se, ok := errors.AsType[*nodeclient.ServiceError](err)
	if !ok || se.Code != code {
		t.Fatalf("error %v, want a service error %d", err, code)
	}
}

func TestExec(t *testing.T) {
	rt := &podRuntime{}
	rt.add(t, "u1", "app", 1, runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt.add(t, "u1", "side", 1, runtimeapi.ContainerState_CONTAINER_EXITED)
	_, nc := serve(t, rt, nodeservice.Config{})
	ref := schemas.PodRef{Namespace: "default", Name: "web", Container: "app"}
	ctx := t.Context()

	resp, err := nodeclient.Exec(ctx, nc, subj, "n1", schemas.ExecRequest{PodRef: ref, Command: []string{"echo", "hi", "there"}})
	if err != nil || string(resp.Stdout) != "hi there\n" || resp.ExitCode != 0 {
		t.Fatalf("echo: %+v, %v", resp, err)
	}
	resp, err = nodeclient.Exec(ctx, nc, subj, "n1", schemas.ExecRequest{PodRef: ref, Command: []string{"exit"}})
	if err != nil || string(resp.Stderr) != "bye\n" || resp.ExitCode != 3 {
		t.Fatalf("exit: %+v, %v", resp, err)
	}
	tests := []struct {
		name string
		req  schemas.ExecRequest
		code int
	}{
		{"timeout", schemas.ExecRequest{PodRef: ref, Command: []string{"sleep"}, TimeoutSeconds: 1}, schemas.ServiceErrTimeout},
		{"not running", schemas.ExecRequest{PodRef: schemas.PodRef{Namespace: "default", Name: "web", Container: "side"}, Command: []string{"echo"}}, schemas.ServiceErrConflict},
		{"no container named", schemas.ExecRequest{PodRef: schemas.PodRef{Namespace: "default", Name: "web"}, Command: []string{"echo"}}, schemas.ServiceErrBadRequest},
		{"no such container", schemas.ExecRequest{PodRef: schemas.PodRef{Namespace: "default", Name: "web", Container: "nope"}, Command: []string{"echo"}}, schemas.ServiceErrNotFound},
		{"no such pod", schemas.ExecRequest{PodRef: schemas.PodRef{Namespace: "default", Name: "nope"}, Command: []string{"echo"}}, schemas.ServiceErrNotFound},
		{"no command", schemas.ExecRequest{PodRef: ref}, schemas.ServiceErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nodeclient.Exec(ctx, nc, subj, "n1", tt.req)
			wantCode(t, err, tt.code)
		})
	}
	if _, err := nodeclient.Exec(ctx, nc, subj, "n2", schemas.ExecRequest{PodRef: ref, Command: []string{"echo"}}); !errors.Is(err, nodeclient.ErrNoNode) {
		t.Fatalf("another node: %v, want ErrNoNode", err)
	}
}

func TestLogsPreviousAndErrors(t *testing.T) {
	rt := &podRuntime{}
	_, old := rt.add(t, "u1", "app", 1, runtimeapi.ContainerState_CONTAINER_EXITED)
	_, cur := rt.add(t, "u1", "app", 2, runtimeapi.ContainerState_CONTAINER_RUNNING)
	appendLog(t, old, "crashed")
	appendLog(t, cur, "one", "two", "three")
	_, nc := serve(t, rt, nodeservice.Config{})
	ref := schemas.PodRef{Namespace: "default", Name: "web"}
	var out bytes.Buffer
	tail := int64(2)
	end, err := nodeclient.Logs(t.Context(), nc, subj, "n1", schemas.LogsRequest{PodRef: ref, TailLines: &tail}, &out)
	if err != nil || end != schemas.LogEndEOF || out.String() != "two\nthree\n" {
		t.Fatalf("tail: %q, %q, %v", out.String(), end, err)
	}
	out.Reset()
	end, err = nodeclient.Logs(t.Context(), nc, subj, "n1", schemas.LogsRequest{PodRef: ref, Previous: true}, &out)
	if err != nil || end != schemas.LogEndEOF || out.String() != "crashed\n" {
		t.Fatalf("previous: %q, %q, %v", out.String(), end, err)
	}
	_, err = nodeclient.Logs(t.Context(), nc, subj, "n1", schemas.LogsRequest{PodRef: schemas.PodRef{Namespace: "default", Name: "web", UID: "u1", Container: "nope"}}, &out)
	wantCode(t, err, schemas.ServiceErrNotFound)
	_, err = nodeclient.Logs(t.Context(), nc, subj, "n1", schemas.LogsRequest{PodRef: ref, Previous: true, Follow: true}, &out)
	wantCode(t, err, schemas.ServiceErrBadRequest)
}

func TestLogsFollowEndsWhenTheContainerExits(t *testing.T) {
	rt := &podRuntime{}
	id, path := rt.add(t, "u1", "app", 1, runtimeapi.ContainerState_CONTAINER_RUNNING)
	_, nc := serve(t, rt, nodeservice.Config{})
	out := &lineSink{}
	type result struct {
		end string
		err error
	}
	done := make(chan result, 1)
	go func() {
		end, err := nodeclient.Logs(t.Context(), nc, subj, "n1", schemas.LogsRequest{PodRef: schemas.PodRef{Namespace: "default", Name: "web"}, Follow: true}, out)
		done <- result{end, err}
	}()
	for i := range 3 {
		appendLog(t, path, fmt.Sprint("line ", i))
		want := fmt.Sprint("line ", i, "\n")
		poll.Until(t, 10*time.Second, func() string { return "followed " + want + ", have " + out.String() }, func() bool { return strings.HasSuffix(out.String(), want) })
	}
	appendLog(t, path, "last")
	rt.setState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	r := <-done
	if r.err != nil || r.end != schemas.LogEndExited || out.String() != "line 0\nline 1\nline 2\nlast\n" {
		t.Fatalf("follow: %q, %q, %v", out.String(), r.end, r.err)
	}
}

// lineSink is an io.Writer the test reads while Logs writes: its lock
// guards b.
type lineSink struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *lineSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lineSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// orderSink checks that lines numbered from 0 arrive complete and in
// order, keeping only the unfinished last line.
type orderSink struct {
	next    int
	partial []byte
	bytes   int64
}

func (s *orderSink) Write(p []byte) (int, error) {
	s.bytes += int64(len(p))
	s.partial = append(s.partial, p...)
	for {
		line, rest, ok := bytes.Cut(s.partial, []byte{'\n'})
		if !ok {
			break
		}
		if want := fmt.Sprintf("%08d %s", s.next, filler); string(line) != want {
			return 0, fmt.Errorf("line %d is %.40q", s.next, line)
		}
		s.next++
		s.partial = append(s.partial[:0], rest...)
	}
	return len(p), nil
}

const filler = "................................................................................................................"

func TestLogsStreamsALargeLogCompletelyAndInOrder(t *testing.T) {
	rt := &podRuntime{}
	_, path := rt.add(t, "u1", "app", 1, runtimeapi.ContainerState_CONTAINER_EXITED)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	const lines = 200_000 // about 30 MiB of log, 25 MiB of lines
	for i := range lines {
		fmt.Fprintf(f, "2026-11-30T10:00:00.000000000Z stdout F %08d %s\n", i, filler)
	}
	f.Close()
	_, nc := serve(t, rt, nodeservice.Config{})
	out := &orderSink{}
	end, err := nodeclient.Logs(t.Context(), nc, subj, "n1", schemas.LogsRequest{PodRef: schemas.PodRef{Namespace: "default", Name: "web"}}, out)
	if err != nil || end != schemas.LogEndEOF || out.next != lines || len(out.partial) != 0 {
		t.Fatalf("got %d of %d lines (%d bytes), end %q: %v", out.next, lines, out.bytes, end, err)
	}
	t.Logf("streamed %d lines, %d bytes", out.next, out.bytes)
}

func TestLogsStopAtTheWindowAndWhenTheClientGoes(t *testing.T) {
	rt := &podRuntime{}
	_, path := rt.add(t, "u1", "app", 1, runtimeapi.ContainerState_CONTAINER_RUNNING)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20_000 { // about 40 chunks
		fmt.Fprintf(f, "2026-11-30T10:00:00.000000000Z stdout F %08d %s\n", i, filler)
	}
	f.Close()
	svc, nc := serve(t, rt, nodeservice.Config{ClientTimeout: 500 * time.Millisecond})
	// A client that asks and never grants credit, as one that died.
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	const window = 4
	body := fmt.Appendf(nil, `{"namespace":"default","name":"web","follow":true,"window":%d}`, window)
	if err := nc.PublishRequest(subj.NodeService("n1", schemas.EndpointLogs), inbox, body); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, poll.Msg("the stream to start"), func() bool { return svc.InFlight() == 1 })
	poll.Until(t, 10*time.Second, poll.Msg("the stream to stop without credit"), func() bool { return svc.InFlight() == 0 })
	n, _, err := sub.Pending()
	if err != nil || n != window+1 {
		t.Fatalf("%d messages sent without credit (%v), want the opening and %d chunks", n, err, window)
	}
}
