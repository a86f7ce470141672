package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/jetlet/jetlet/schemas"
)

// Event ids are deterministic, so that the same runtime fact seen twice (by a
// sync and by the relist loop, or again after jetlet restarts) publishes with
// the same Nats-Msg-Id and is stored once:
//
//	<containerId>.<Type>  ContainerCreated, ContainerStarted, ContainerDied,
//	                      ContainerKilled, ContainerRemoved, and BackOff (the
//	                      id of the exited instance being backed off: one
//	                      BackOff per crash)
//	<sandboxId>.<Type>    SandboxCreated, SandboxStopped, SandboxRemoved
//	<hash>.<Type>         ImagePulled, ImagePullFailed: no runtime object
//	                      exists, so <hash> is the first 16 hex digits of
//	                      SHA-256 over uid, container, image and the image
//	                      reference (pulled) or the failure time (failed).
//
// EventID builds the first two forms.
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

// containerEvent emits a fact about one container instance.
func (m *Manager) containerEvent(ctx context.Context, pod podRef, typ schemas.EventType, container, containerID, sandboxID string, attempt uint32, reason, message string) {
	ev := newEvent(m.cfg.NodeName, pod, typ, EventID(containerID, typ), m.cfg.Clock.Now())
	ev.Container, ev.ContainerID, ev.SandboxID, ev.Attempt = container, containerID, sandboxID, attempt
	ev.Reason, ev.Message = reason, message
	m.emit.Emit(ctx, ev)
}

// sandboxEvent emits a fact about one sandbox.
func (m *Manager) sandboxEvent(ctx context.Context, pod podRef, typ schemas.EventType, sandboxID string, attempt uint32, message string) {
	ev := newEvent(m.cfg.NodeName, pod, typ, EventID(sandboxID, typ), m.cfg.Clock.Now())
	ev.SandboxID, ev.Attempt, ev.Message = sandboxID, attempt, message
	m.emit.Emit(ctx, ev)
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

// ContainerStartedEvent derives the ContainerStarted event of a running
// container instance, for re-deriving facts after events were lost: id
// <containerId>.ContainerStarted, time the instance's startedAt.
func ContainerStartedEvent(node string, pod *PodStatus, cs *ContainerStatus) (ev schemas.LifecycleEvent, ok bool) {
	if cs == nil || cs.State != ContainerRunning {
		return ev, false
	}
	ev = newEvent(node, podRef{pod.UID, pod.Namespace, pod.Name}, schemas.EventContainerStarted, EventID(cs.ID, schemas.EventContainerStarted), cs.StartedAt)
	ev.Container, ev.ContainerID, ev.SandboxID, ev.Attempt = cs.Name, cs.ID, cs.SandboxID, cs.Attempt
	return ev, true
}

// ContainerDiedEvent derives the ContainerDied event of an exited container
// instance of the pod, for the relist loop: id <containerId>.ContainerDied,
// time the instance's finishedAt. ok is false unless the instance exited.
func ContainerDiedEvent(node string, pod *PodStatus, cs *ContainerStatus) (ev schemas.LifecycleEvent, ok bool) {
	if cs == nil || cs.State != ContainerExited {
		return ev, false
	}
	t := cs.FinishedAt
	ev = newEvent(node, podRef{pod.UID, pod.Namespace, pod.Name}, schemas.EventContainerDied, EventID(cs.ID, schemas.EventContainerDied), t)
	ev.Container, ev.ContainerID, ev.SandboxID, ev.Attempt = cs.Name, cs.ID, cs.SandboxID, cs.Attempt
	code := cs.ExitCode
	ev.ExitCode = &code
	ev.Reason = DiedReason(cs)
	ev.Message = cs.Message
	return ev, true
}
