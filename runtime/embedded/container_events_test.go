package embedded

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	evCreated = runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT
	evStarted = runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT
	evStopped = runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT
	evDeleted = runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT
)

// eventSub is a GetContainerEvents stream read in the background.
type eventSub struct {
	t      *testing.T
	events chan *runtimeapi.ContainerEventResponse // closed when the stream ends
	err    chan error                              // why it ended
	cancel context.CancelFunc
}

func subscribeEvents(t *testing.T, rs runtimeapi.RuntimeServiceClient) *eventSub {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := rs.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatalf("GetContainerEvents: %v", err)
	}
	s := &eventSub{t: t, events: make(chan *runtimeapi.ContainerEventResponse, 1<<16), err: make(chan error, 1), cancel: cancel}
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				s.err <- err
				close(s.events)
				return
			}
			s.events <- ev
		}
	}()
	return s
}

// next returns the next event, failing the test when none comes in time.
func (s *eventSub) next() *runtimeapi.ContainerEventResponse {
	s.t.Helper()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case ev, ok := <-s.events:
		if !ok {
			s.t.Fatalf("event stream ended: %v", <-s.err)
		}
		return ev
	case <-t.C:
		s.t.Fatal("timed out waiting for a container event")
		return nil
	}
}

// ended waits for the stream to end and returns why.
func (s *eventSub) ended() error {
	s.t.Helper()
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return <-s.err
			}
		case <-t.C:
			s.t.Fatal("timed out waiting for the event stream to end")
			return nil
		}
	}
}

// waitSubscribers waits until the runtime has n event subscribers.
func (h *harness) waitSubscribers(n int) {
	h.t.Helper()
	eventually(h.t, fmt.Sprintf("%d event subscribers", n), func() bool {
		h.rt.mu.RLock()
		defer h.rt.mu.RUnlock()
		return len(h.rt.subs) == n
	})
}

// statusIn finds container id's status in ev.
func statusIn(ev *runtimeapi.ContainerEventResponse, id string) *runtimeapi.ContainerStatus {
	for _, cs := range ev.GetContainersStatuses() {
		if cs.GetId() == id {
			return cs
		}
	}
	return nil
}

// checkEvent checks what an event says of its container against the type,
// and that ContainerStatus, asked on receipt, already shows that state or a
// later one.
func (h *harness) checkEvent(ev *runtimeapi.ContainerEventResponse, sb string) {
	h.t.Helper()
	id := ev.GetContainerId()
	if ev.GetCreatedAt() == 0 || ev.GetPodSandboxStatus().GetId() != sb {
		h.t.Fatalf("%v for %s: created_at %d sandbox %v", ev.GetContainerEventType(), id, ev.GetCreatedAt(), ev.GetPodSandboxStatus())
	}
	cs := statusIn(ev, id)
	resp, err := h.rs.ContainerStatus(ctxT(h.t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	now := resp.GetStatus().GetState()
	// Removed since (by the test) is later than any state.
	gone := status.Code(err) == codes.NotFound
	if err != nil && !gone {
		h.t.Fatal(err)
	}
	var want runtimeapi.ContainerState
	switch ev.GetContainerEventType() {
	case evCreated:
		want = runtimeapi.ContainerState_CONTAINER_CREATED
	case evStarted:
		want = runtimeapi.ContainerState_CONTAINER_RUNNING
		if !gone && now == runtimeapi.ContainerState_CONTAINER_CREATED {
			h.t.Fatalf("STARTED for %s, then ContainerStatus says %v, %v", id, now, err)
		}
	case evStopped:
		want = runtimeapi.ContainerState_CONTAINER_EXITED
		if !gone && now != want {
			h.t.Fatalf("STOPPED for %s, then ContainerStatus says %v, %v", id, now, err)
		}
	case evDeleted:
		if cs != nil {
			h.t.Fatalf("DELETED for %s still lists its status", id)
		}
		if !gone {
			h.t.Fatalf("DELETED for %s, then ContainerStatus says %v, %v", id, now, err)
		}
		return
	}
	if cs == nil || cs.GetState() != want {
		h.t.Fatalf("%v for %s: its status in the event is %v, want state %v", ev.GetContainerEventType(), id, cs, want)
	}
}

// collect reads events until every id in want has had its listed types, and
// checks each. It fails on an event of another type for those ids, on an
// event out of order, and on events for other containers.
func (h *harness) collect(sub *eventSub, sb string, want map[string][]runtimeapi.ContainerEventType) map[string][]*runtimeapi.ContainerEventResponse {
	h.t.Helper()
	got := map[string][]*runtimeapi.ContainerEventResponse{}
	remaining := 0
	for _, types := range want {
		remaining += len(types)
	}
	for remaining > 0 {
		ev := sub.next()
		id := ev.GetContainerId()
		i := len(got[id])
		if i >= len(want[id]) || want[id][i] != ev.GetContainerEventType() {
			h.t.Fatalf("unexpected event %v for %s after %d events; want %v", ev.GetContainerEventType(), id, i, want[id])
		}
		h.checkEvent(ev, sb)
		got[id] = append(got[id], ev)
		remaining--
	}
	return got
}

func TestContainerEventsLifecycle(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.pod("p", nil)
	sub := subscribeEvents(t, h.rs)
	h.waitSubscribers(1)

	// One exits by itself, one is stopped.
	exits := h.create(sb, sbCfg, containerConfig("exits", nil, "sh", "-c", "exit 3"))
	h.startC(exits)
	got := h.collect(sub, sb, map[string][]runtimeapi.ContainerEventType{exits: {evCreated, evStarted, evStopped}})
	if cs := statusIn(got[exits][2], exits); cs.GetExitCode() != 3 || cs.GetReason() != "Error" || cs.GetFinishedAt() == 0 {
		t.Fatalf("STOPPED status: %v", cs)
	}

	stopped := h.run(sb, sbCfg, "stopped", "sleep", "1000")
	if _, err := h.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: stopped, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{exits, stopped} {
		if _, err := h.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
			t.Fatal(err)
		}
	}
	got = h.collect(sub, sb, map[string][]runtimeapi.ContainerEventType{
		exits:   {evDeleted},
		stopped: {evCreated, evStarted, evStopped, evDeleted},
	})
	ev := got[stopped][2]
	if cs := statusIn(ev, stopped); cs.GetExitCode() != 143 {
		t.Fatalf("STOPPED after StopContainer: exit %d, want 143", cs.GetExitCode())
	}
	// The event carries the whole sandbox: the other container too.
	if statusIn(ev, exits).GetState() != runtimeapi.ContainerState_CONTAINER_EXITED || len(ev.GetContainersStatuses()) != 2 {
		t.Fatalf("STOPPED event statuses: %v", ev.GetContainersStatuses())
	}
	if ev.GetPodSandboxStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || ev.GetPodSandboxStatus().GetMetadata().GetName() != "p" {
		t.Fatalf("sandbox status: %v", ev.GetPodSandboxStatus())
	}

	// A failed start is a stop too.
	bad := h.create(sb, sbCfg, containerConfig("bad", nil, "/nonexistent/command"))
	if _, err := h.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: bad}); err == nil {
		t.Fatal("StartContainer of a missing command succeeded")
	}
	got = h.collect(sub, sb, map[string][]runtimeapi.ContainerEventType{bad: {evCreated, evStopped}})
	if cs := statusIn(got[bad][1], bad); cs.GetReason() != "StartError" {
		t.Fatalf("STOPPED after a failed start: %v", cs)
	}

	// A subscriber whose stream ends is dropped.
	sub.cancel()
	h.waitSubscribers(0)
}

func TestContainerEventsSandboxRemoval(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	running := h.run(sb, sbCfg, "running", "sleep", "1000")
	created := h.create(sb, sbCfg, containerConfig("created", nil, "true"))
	sub := subscribeEvents(t, h.rs)
	h.waitSubscribers(1)

	if _, err := h.rs.RemovePodSandbox(ctxT(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	got := h.collect(sub, sb, map[string][]runtimeapi.ContainerEventType{
		running: {evStopped, evDeleted},
		created: {evDeleted},
	})
	// The sandbox is stopped before its containers are removed.
	for _, ev := range append(got[running][1:], got[created]...) {
		if ev.GetPodSandboxStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
			t.Fatalf("DELETED: sandbox status %v", ev.GetPodSandboxStatus())
		}
	}
}

func TestContainerEventsOverflow(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)

	// The slow subscriber never reads: with a fixed 64 KiB flow-control
	// window, the server's sends block and its buffer of 4 fills.
	h.rt.mu.Lock()
	h.rt.eventBuffer = 4
	h.rt.mu.Unlock()
	conn, err := grpc.NewClient("unix://"+h.sock, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	slow, err := runtimeapi.NewRuntimeServiceClient(conn).GetContainerEvents(ctxT(t), &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	h.waitSubscribers(1)
	h.rt.mu.Lock()
	h.rt.eventBuffer = 1 << 12
	h.rt.mu.Unlock()
	fast := subscribeEvents(t, h.rs)
	h.waitSubscribers(2)

	// Each event carries every container's status, 16 KiB apiece.
	big := strings.Repeat("x", 16<<10)
	var ids []string
	for len(ids) < 200 {
		cfg := containerConfig(fmt.Sprintf("c%d", len(ids)), nil, "sleep", "1000")
		cfg.Annotations = map[string]string{"big": big}
		ids = append(ids, h.create(sb, sbCfg, cfg))
		h.rt.mu.RLock()
		n := len(h.rt.subs)
		h.rt.mu.RUnlock()
		if n == 1 {
			break
		}
	}
	h.waitSubscribers(1)
	t.Logf("slow subscriber dropped after %d events", len(ids))

	// The fast one has every event, in order.
	for _, id := range ids {
		ev := fast.next()
		if ev.GetContainerId() != id || ev.GetContainerEventType() != evCreated {
			t.Fatalf("fast subscriber: got %v for %s, want CREATED for %s", ev.GetContainerEventType(), ev.GetContainerId(), id)
		}
	}
	// The slow one gets what was queued, in order, then the error.
	n := 0
	for {
		ev, err := slow.Recv()
		if err != nil {
			if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "resubscribe") {
				t.Fatalf("slow subscriber ended with %v, want ResourceExhausted", err)
			}
			break
		}
		if ev.GetContainerId() != ids[n] {
			t.Fatalf("slow subscriber: event %d is for %s, want %s", n, ev.GetContainerId(), ids[n])
		}
		n++
	}
	if n >= len(ids) {
		t.Fatalf("slow subscriber received all %d events and still got the error", n)
	}
	// The fast one carries on.
	h.startC(ids[0])
	if ev := fast.next(); ev.GetContainerId() != ids[0] || ev.GetContainerEventType() != evStarted {
		t.Fatalf("fast subscriber after the overflow: %v for %s", ev.GetContainerEventType(), ev.GetContainerId())
	}
}

func TestContainerEventsExitWhileRuntimeDown(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	gate := filepath.Join(h.shared, "gate")
	id := h.run(sb, sbCfg, "c", "sh", "-c", "echo ready; while [ ! -e "+gate+" ]; do sleep 0.02; done; exit 5")
	other := h.run(sb, sbCfg, "other", "sleep", "1000")
	// In a pod of its own: its shim is killed below, and with it its pod.
	lostSb, lostSbCfg := h.pod("lostpod", nil)
	lost := h.run(lostSb, lostSbCfg, "lost", "sleep", "1000")
	stateDir := h.rt.containersDir()
	var lostShim shim.State
	if err := atomicfile.ReadJSON(filepath.Join(stateDir, lost, "shim.json"), &lostShim); err != nil {
		t.Fatal(err)
	}
	h.waitLog(h.status(id).GetLogPath(), "ready")
	pid := h.pid(id)

	// A stream of the old runtime, on its own connection, ends with Stop.
	conn, err := grpc.NewClient("unix://"+h.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	old := subscribeEvents(t, runtimeapi.NewRuntimeServiceClient(conn))
	h.waitSubscribers(1)
	h.stop()
	if err := old.ended(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream of a stopped runtime ended with %v, want Unavailable", err)
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Also a shim killed while the runtime is down: its exit is unknown.
	if err := syscall.Kill(lostShim.ShimPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "container and shims to end while the runtime is down", func() bool {
		return !processAlive(pid) && !shimAlive(filepath.Join(stateDir, id, "shim.lock")) &&
			!shimAlive(filepath.Join(stateDir, lost, "shim.lock"))
	})
	h.start()

	// The first subscriber of the new runtime learns of the exit first...
	sub := subscribeEvents(t, h.rs)
	h.waitSubscribers(1)
	got := map[string][]*runtimeapi.ContainerEventResponse{}
	for len(got) < 2 {
		ev := sub.next()
		evSb := map[string]string{id: sb, lost: lostSb}[ev.GetContainerId()]
		if evSb == "" || len(got[ev.GetContainerId()]) > 0 || ev.GetContainerEventType() != evStopped {
			t.Fatalf("unexpected %v for %s; want one STOPPED each for %s and %s", ev.GetContainerEventType(), ev.GetContainerId(), id, lost)
		}
		h.checkEvent(ev, evSb)
		got[ev.GetContainerId()] = append(got[ev.GetContainerId()], ev)
	}
	if cs := statusIn(got[id][0], id); cs.GetExitCode() != 5 {
		t.Fatalf("STOPPED after restart: %v", cs)
	}
	if cs := statusIn(got[lost][0], lost); cs.GetExitCode() != 255 || cs.GetReason() != "Unknown" {
		t.Fatalf("STOPPED of the lost shim after restart: %v", cs)
	}
	// ...then of later changes.
	if _, err := h.rs.StopContainer(ctxT(t), &runtimeapi.StopContainerRequest{ContainerId: other, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	h.collect(sub, sb, map[string][]runtimeapi.ContainerEventType{other: {evStopped}})

	// Reported once: after another restart, neither exit is reported again.
	h.restart()
	sub = subscribeEvents(t, h.rs)
	h.waitSubscribers(1)
	next := h.create(sb, sbCfg, containerConfig("next", nil, "true"))
	h.collect(sub, sb, map[string][]runtimeapi.ContainerEventType{next: {evCreated}})
}
