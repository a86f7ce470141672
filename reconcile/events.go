package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
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

func hashID(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:8])
}

// podRef names the pod an event is about.
type podRef struct {
	UID, Namespace, Name string
}

func newEvent(node string, pod podRef, typ schemas.EventType, id string, t time.Time) schemas.LifecycleEvent {
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

// BackOffEventID is the id of the BackOff of the exited instance dead: one
// per back-off period of its container.
func BackOffEventID(dead *ContainerStatus) string {
	return EventID(dead.ID+"."+strconv.Itoa(dead.RestartCount), schemas.EventBackOff)
}

// instance is the container instance an event is about.
type instance struct {
	container, id, sandboxID string
	attempt                  uint32
}

func instanceOf(cs *ContainerStatus) instance {
	return instance{container: cs.Name, id: cs.ID, sandboxID: cs.SandboxID, attempt: cs.Attempt}
}

// containerEvent emits a fact, now, about one container instance.
func (m *Manager) containerEvent(ctx context.Context, pod podRef, in instance, typ schemas.EventType, reason, message string) {
	ev := instanceEvent(m.cfg.NodeName, pod, in, typ, m.cfg.Clock.Now())
	ev.Reason, ev.Message = reason, message
	m.emit.Emit(ctx, ev)
}

// sandboxEvent emits a fact about one sandbox.
func (m *Manager) sandboxEvent(ctx context.Context, pod podRef, typ schemas.EventType, sandboxID string, attempt uint32, message string) {
	ev := newEvent(m.cfg.NodeName, pod, typ, EventID(sandboxID, typ), m.cfg.Clock.Now())
	ev.SandboxID, ev.Attempt, ev.Message = sandboxID, attempt, message
	m.emit.Emit(ctx, ev)
}

// instanceEvent is a fact of type typ about the container instance in, at t,
// with the id a live emission of that fact has.
func instanceEvent(node string, pod podRef, in instance, typ schemas.EventType, t time.Time) schemas.LifecycleEvent {
	ev := newEvent(node, pod, typ, EventID(in.id, typ), t)
	ev.Container, ev.ContainerID, ev.SandboxID, ev.Attempt = in.container, in.id, in.sandboxID, in.attempt
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
	ev = instanceEvent(node, podRef{pod.UID, pod.Namespace, pod.Name}, instanceOf(cs), schemas.EventContainerDied, cs.FinishedAt)
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
	ref := podRef{pod.UID, pod.Namespace, pod.Name}
	var facts []schemas.LifecycleEvent
	for _, s := range pod.SandboxStatuses {
		ev := newEvent(node, ref, schemas.EventSandboxCreated, EventID(s.GetId(), schemas.EventSandboxCreated), fromNanos(s.GetCreatedAt()))
		ev.SandboxID, ev.Attempt = s.GetId(), s.GetMetadata().GetAttempt()
		facts = append(facts, ev)
	}
	for _, cs := range pod.ContainerStatuses {
		facts = append(facts, instanceEvent(node, ref, instanceOf(cs), schemas.EventContainerCreated, cs.CreatedAt))
		if !cs.StartedAt.IsZero() {
			facts = append(facts, instanceEvent(node, ref, instanceOf(cs), schemas.EventContainerStarted, cs.StartedAt))
		}
		if ev, ok := ContainerDiedEvent(node, pod, cs); ok {
			facts = append(facts, ev)
		}
	}
	slices.SortStableFunc(facts, func(a, b schemas.LifecycleEvent) int { return a.Time.Compare(b.Time) })
	return facts
}

// UnhealthyEvent is the Unhealthy event of the container instance cs of pod:
// its probe of kind turned to failure for the n-th time (n from 1), at t, and
// message is the handler's. Its id, <containerId>.<kind>.<n>.Unhealthy, makes
// one event per transition to failure, not one per failed period.
func UnhealthyEvent(node string, pod *PodStatus, cs *ContainerStatus, kind schemas.ProbeKind, n int, message string, t time.Time) schemas.LifecycleEvent {
	ev := instanceEvent(node, podRef{pod.UID, pod.Namespace, pod.Name}, instanceOf(cs), schemas.EventUnhealthy, t)
	ev.ID = EventID(cs.ID+"."+string(kind)+"."+strconv.Itoa(n), schemas.EventUnhealthy)
	ev.Probe, ev.Message = kind, message
	return ev
}
