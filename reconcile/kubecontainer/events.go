package kubecontainer

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jetlet/jetlet/schemas"
)

// Event ids are deterministic, so that the same runtime fact seen twice (by a
// sync and by the relist loop, or again after jetlet restarts) publishes with
// the same Nats-Msg-Id, and the publisher's ledger stores it once:
//
//	<containerId>.<Type>  ContainerCreated, ContainerStarted, ContainerDied,
//	                      ContainerKilled, ContainerRemoved
//	<containerId>.<restartCount>.BackOff
//	                      BackOff: the exited instance being backed off and its
//	                      restart count, so one BackOff per back-off period
//	                      (BackOffEventID)
//	<sandboxId>.<Type>    SandboxCreated, SandboxStopped, SandboxRemoved
//	<hash>.<Type>         ImagePulled, ImagePullFailed: no runtime object
//	                      exists, so <hash> is the first 16 hex digits of
//	                      SHA-256 over uid, container, image and the image
//	                      reference (pulled) or the failure time (failed).
//
// EventID builds the first and third forms.
func EventID(runtimeID string, typ schemas.EventType) string {
	return runtimeID + "." + string(typ)
}

// PodRef names the pod an event is about.
type PodRef struct {
	UID, Namespace, Name string
}

// NewEvent is a lifecycle event of type typ about pod, with id, at t.
func NewEvent(node string, pod PodRef, typ schemas.EventType, id string, t time.Time) schemas.LifecycleEvent {
	return schemas.LifecycleEvent{
		APIVersion: schemas.APIVersion,
		Kind:       schemas.KindLifecycleEvent,
		ID:         id,
		Type:       typ,
		Node:       node,
		UID:        pod.UID,
		Namespace:  pod.Namespace,
		Pod:        pod.Name,
		Time:       t.UTC(),
	}
}

func refOf(pod *PodStatus) PodRef {
	return PodRef{UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name}
}

// BackOffEventID is the id of the BackOff of the exited instance dead: one
// per back-off period of its container.
func BackOffEventID(dead *ContainerStatus) string {
	return EventID(dead.ID+"."+strconv.Itoa(dead.RestartCount), schemas.EventBackOff)
}

// Instance is the container instance an event is about.
type Instance struct {
	Container, ID, SandboxID string
	Attempt                  uint32
}

// InstanceOf is the instance cs is.
func InstanceOf(cs *ContainerStatus) Instance {
	return Instance{Container: cs.Name, ID: cs.ID, SandboxID: cs.SandboxID, Attempt: cs.Attempt}
}

// InstanceEvent is a fact of type typ about the container instance in, at t,
// with the id a live emission of that fact has.
func InstanceEvent(node string, pod PodRef, in Instance, typ schemas.EventType, t time.Time) schemas.LifecycleEvent {
	ev := NewEvent(node, pod, typ, EventID(in.ID, typ), t)
	ev.Container, ev.ContainerID, ev.SandboxID, ev.Attempt = in.Container, in.ID, in.SandboxID, in.Attempt
	return ev
}

// DiedReason is the ContainerDied reason of an exited container: OOMKilled,
// Completed (exit 0) or Error.
func DiedReason(cs *ContainerStatus) string {
	switch {
	case cs.Reason == schemas.ReasonOOMKilled:
		return schemas.ReasonOOMKilled
	case cs.ExitCode == 0:
		return schemas.ReasonCompleted
	}
	return schemas.ReasonError
}

// ContainerDiedEvent derives the ContainerDied event of an exited container
// instance of the pod, for the relist loop: id <containerId>.ContainerDied,
// time the instance's finishedAt. ok is false unless the instance exited.
func ContainerDiedEvent(node string, pod *PodStatus, cs *ContainerStatus) (ev schemas.LifecycleEvent, ok bool) {
	if cs == nil || cs.State != ContainerExited {
		return ev, false
	}
	ev = InstanceEvent(node, refOf(pod), InstanceOf(cs), schemas.EventContainerDied, cs.FinishedAt)
	code := cs.ExitCode
	ev.ExitCode = &code
	ev.Reason = DiedReason(cs)
	ev.Message = cs.Message
	return ev, true
}

// PodFacts derives every fact the pod's runtime status implies, oldest first,
// each with the id and the time of the fact (not of its derivation):
// SandboxCreated for each sandbox (its createdAt), and for each container
// instance ContainerCreated (createdAt), ContainerStarted once it started
// (startedAt) and ContainerDied once it exited (finishedAt, exit code,
// reason). The ids are those of the live emissions, so a fact emitted both
// ways is stored once. After a crash this restores what was lost between a
// runtime call and the publication of its event.
func PodFacts(node string, pod *PodStatus) []schemas.LifecycleEvent {
	ref := refOf(pod)
	var facts []schemas.LifecycleEvent
	for _, s := range pod.SandboxStatuses {
		ev := NewEvent(node, ref, schemas.EventSandboxCreated, EventID(s.GetId(), schemas.EventSandboxCreated), FromNanos(s.GetCreatedAt()))
		ev.SandboxID, ev.Attempt = s.GetId(), s.GetMetadata().GetAttempt()
		facts = append(facts, ev)
	}
	for _, cs := range pod.ContainerStatuses {
		facts = append(facts, InstanceEvent(node, ref, InstanceOf(cs), schemas.EventContainerCreated, cs.CreatedAt))
		if !cs.StartedAt.IsZero() {
			facts = append(facts, InstanceEvent(node, ref, InstanceOf(cs), schemas.EventContainerStarted, cs.StartedAt))
		}
		if ev, ok := ContainerDiedEvent(node, pod, cs); ok {
			facts = append(facts, ev)
		}
	}
	slices.SortStableFunc(facts, func(a, b schemas.LifecycleEvent) int { return a.Time.Compare(b.Time) })
	return facts
}

// UnhealthyEvent is the Unhealthy event of one failed run, at t, of the probe
// of kind of the container instance cs of pod; message is kubelet's ("<kind>
// probe failed: <the handler's output>"). A failed run is no fact the runtime
// keeps, so its id names the run by its time:
// <containerId>.<kind>.<t in Unix nanoseconds>.Unhealthy.
func UnhealthyEvent(node string, pod *PodStatus, cs *ContainerStatus, kind schemas.ProbeKind, message string, t time.Time) schemas.LifecycleEvent {
	ev := InstanceEvent(node, refOf(pod), InstanceOf(cs), schemas.EventUnhealthy, t)
	ev.ID = EventID(cs.ID+"."+string(kind)+"."+strconv.FormatInt(t.UnixNano(), 10), schemas.EventUnhealthy)
	ev.Probe, ev.Message = kind, message
	return ev
}

// Emitter receives every lifecycle event reconcile and its children produce.
// Emit must not block for long; it is called from the sync (or the relist, or
// the probe) that produced the event. The event carries everything but
// IntentSeq and Revision, which the caller's Emitter may add from ctx.
type Emitter interface {
	Emit(ctx context.Context, ev schemas.LifecycleEvent)
}

// Flusher is an Emitter that can wait until every event it was given is
// stored. Garbage collection flushes the facts about what it is about to
// remove before removing it: once a container or sandbox is gone, nothing can
// derive its facts again (a crash between the removal and the publication
// would lose them).
type Flusher interface {
	Flush(ctx context.Context) error
}

// EmitterFunc adapts a function to Emitter.
type EmitterFunc func(ctx context.Context, ev schemas.LifecycleEvent)

// Emit implements Emitter.
func (f EmitterFunc) Emit(ctx context.Context, ev schemas.LifecycleEvent) { f(ctx, ev) }
