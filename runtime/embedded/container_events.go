package embedded

import (
	"os"
	"path/filepath"
	"sort"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// defaultEventBuffer is how many events a subscriber may fall behind before
// its stream is ended with ResourceExhausted.
const defaultEventBuffer = 1024

// reportedFile marks, in a container's dir, an exit that a runtime has
// published. An exit.json without it was recorded while no runtime watched:
// the next Start reports it (see pendingExits).
const reportedFile = "exit.reported"

// subscriber is one GetContainerEvents stream.
type subscriber struct {
	ch   chan *runtimeapi.ContainerEventResponse
	lost chan struct{} // closed, and the subscriber dropped, when ch overflowed
}

// GetContainerEvents streams a ContainerEventResponse for every change of a
// container's state from the moment of the call, as containerd does:
// CONTAINER_CREATED_EVENT (CreateContainer), CONTAINER_STARTED_EVENT
// (StartContainer), CONTAINER_STOPPED_EVENT (the exit is recorded, whatever
// ended the process, including a failed start), CONTAINER_DELETED_EVENT
// (RemoveContainer, RemovePodSandbox).
//
// Each event is built and queued in the same critical section as the state
// change it reports, so events of one container arrive in order, and a client
// calling ContainerStatus or ListContainers on receiving one sees that state
// or a later one. It carries the sandbox's status (nil once the sandbox is
// gone) and the statuses of all the sandbox's containers at that moment (the
// removed one is absent from a DELETED event's), as PodSandboxStatus and
// ContainerStatus report them.
//
// The runtime never waits for a subscriber: each has a buffer of eventBuffer
// events, and one that falls further behind is dropped and its stream ended
// with ResourceExhausted, so that it resubscribes and relists rather than
// miss an event unknowingly. Stop ends every stream with Unavailable.
//
// The first stream opened after Start begins with a STOPPED event for each
// container whose exit was recorded while no runtime was running.
func (r *Runtime) GetContainerEvents(req *runtimeapi.GetEventsRequest, stream grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]) error {
	sub, backlog, ok := r.subscribe()
	if !ok {
		return errorf(crierr.ErrUnavailable, "jetlet-proc is stopping")
	}
	defer r.unsubscribe(sub)
	for i, ev := range backlog {
		if err := stream.Send(ev); err != nil {
			r.requeuePending(backlog[i:])
			return err
		}
		r.markReported(ev.GetContainerId())
	}
	ctx := stream.Context()
	for {
		select {
		case ev := <-sub.ch:
			if err := stream.Send(ev); err != nil {
				return err
			}
		case <-sub.lost:
			return errorf(crierr.ErrResourceExhausted, "container events lost: the subscriber fell more than %d events behind; resubscribe and relist", cap(sub.ch))
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done:
			return errorf(crierr.ErrUnavailable, "jetlet-proc is stopping")
		}
	}
}

// subscribe registers a subscriber and hands it the pending exits (to the
// first subscriber only). It reports false once the runtime is stopped.
func (r *Runtime) subscribe() (*subscriber, []*runtimeapi.ContainerEventResponse, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil, nil, false
	}
	sub := &subscriber{
		ch:   make(chan *runtimeapi.ContainerEventResponse, r.eventBuffer),
		lost: make(chan struct{}),
	}
	r.subs[sub] = struct{}{}
	var backlog []*runtimeapi.ContainerEventResponse
	for _, id := range r.pendingExits {
		if c, ok := r.containers[id]; ok && c.exit != nil {
			backlog = append(backlog, r.eventLocked(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT))
		}
	}
	r.pendingExits = nil
	r.pendingOpen = false
	return sub, backlog, true
}

func (r *Runtime) unsubscribe(sub *subscriber) {
	r.mu.Lock()
	delete(r.subs, sub)
	r.mu.Unlock()
}

// requeuePending gives pending exits a stream could not send to the next
// subscriber.
func (r *Runtime) requeuePending(evs []*runtimeapi.ContainerEventResponse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(evs)+len(r.pendingExits))
	for _, ev := range evs {
		ids = append(ids, ev.GetContainerId())
	}
	r.pendingExits = append(ids, r.pendingExits...)
	r.pendingOpen = true
}

// emitLocked queues an event of type typ about c for every subscriber; r.mu
// must be write-locked and c's new state already set. A subscriber whose
// buffer is full is dropped: its stream ends with ResourceExhausted.
func (r *Runtime) emitLocked(c *container, typ runtimeapi.ContainerEventType) {
	if len(r.subs) == 0 {
		return
	}
	ev := r.eventLocked(c, typ)
	for sub := range r.subs {
		select {
		case sub.ch <- ev:
		default:
			close(sub.lost)
			delete(r.subs, sub)
			r.log.Warn().Int("buffer", cap(sub.ch)).Msg("container event subscriber fell behind; ending its stream")
		}
	}
}

// eventLocked builds the event for c: the sandbox's status and the statuses of
// all its containers, newest first as ListContainers orders them.
func (r *Runtime) eventLocked(c *container, typ runtimeapi.ContainerEventType) *runtimeapi.ContainerEventResponse {
	ev := &runtimeapi.ContainerEventResponse{
		ContainerId:        c.id,
		ContainerEventType: typ,
		CreatedAt:          nowNano(),
		ContainersStatuses: []*runtimeapi.ContainerStatus{},
	}
	if s, ok := r.sandboxes[c.sandboxID]; ok {
		ev.PodSandboxStatus = s.statusLocked(r.net == nil)
	}
	var siblings []*container
	for _, o := range r.containers {
		if o.sandboxID == c.sandboxID {
			siblings = append(siblings, o)
		}
	}
	sort.Slice(siblings, func(i, j int) bool {
		if siblings[i].createdAt != siblings[j].createdAt {
			return siblings[i].createdAt > siblings[j].createdAt
		}
		return siblings[i].id < siblings[j].id
	})
	for _, o := range siblings {
		ev.ContainersStatuses = append(ev.ContainersStatuses, o.statusLocked())
	}
	return ev
}

// recordExitLocked makes c EXITED with ex and publishes CONTAINER_STOPPED_EVENT;
// r.mu must be write-locked. An exit found while the runtime starts is kept
// for the first subscriber. It reports whether the caller should mark the
// exit reported (markReported, without r.mu).
func (r *Runtime) recordExitLocked(c *container, ex *shim.Exit) bool {
	c.exit = ex
	if _, ok := r.containers[c.id]; !ok {
		return false
	}
	r.emitLocked(c, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	if c.exitAtStart && r.pendingOpen {
		r.pendingExits = append(r.pendingExits, c.id)
		return false
	}
	// A stopped runtime (the shims outlive it) leaves the exit to the next.
	return !r.stopped
}

// markReported records that c's exit has been published. Best effort: a lost
// mark only makes the next Start report the exit again.
func (r *Runtime) markReported(id string) {
	_ = os.WriteFile(filepath.Join(r.containerDir(id), reportedFile), nil, 0o600)
}

// exitReported tells whether a runtime published the exit recorded in dir.
func exitReported(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, reportedFile))
	return err == nil
}
