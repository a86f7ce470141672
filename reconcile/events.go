package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

func hashID(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:8])
}

// containerEvent emits a fact, now, about one container instance.
func (m *Kuberuntime) containerEvent(ctx context.Context, pod kubecontainer.PodRef, in kubecontainer.Instance, typ schemas.EventType, reason, message string) {
	ev := kubecontainer.InstanceEvent(m.cfg.NodeName, pod, in, typ, m.cfg.Clock.Now())
	ev.Reason, ev.Message = reason, message
	m.emit.Emit(ctx, ev)
}

// sandboxEvent emits a fact about one sandbox.
func (m *Kuberuntime) sandboxEvent(ctx context.Context, pod kubecontainer.PodRef, typ schemas.EventType, sandboxID string, attempt uint32, message string) {
	ev := kubecontainer.NewEvent(m.cfg.NodeName, pod, typ, kubecontainer.EventID(sandboxID, typ), m.cfg.Clock.Now())
	ev.SandboxID, ev.Attempt, ev.Message = sandboxID, attempt, message
	m.emit.Emit(ctx, ev)
}

// dnsEvent records a warning the DNS config of a new sandbox made, once per
// sandbox.
func (m *Kuberuntime) dnsEvent(ctx context.Context, pod kubecontainer.PodRef, sandboxID string, w dnsWarning) {
	ev := kubecontainer.NewEvent(m.cfg.NodeName, pod, w.typ, hashID(sandboxID, w.message)+"."+string(w.typ), m.cfg.Clock.Now())
	ev.SandboxID, ev.Reason, ev.Message = sandboxID, string(w.typ), w.message
	m.emit.Emit(ctx, ev)
}

// resizeErrorEvent says a resize failed: kubelet's ResizeError. Its id holds
// the time: a failure is no replayable fact, and each retry's is one.
func (m *Kuberuntime) resizeErrorEvent(ctx context.Context, pod kubecontainer.PodRef, u ContainerToUpdate, msg string) {
	now := m.cfg.Clock.Now()
	ev := kubecontainer.NewEvent(m.cfg.NodeName, pod, schemas.EventResizeError,
		kubecontainer.EventID(hashID(pod.UID, u.ID, msg, now.String()), schemas.EventResizeError), now)
	ev.Container, ev.ContainerID, ev.Reason, ev.Message = u.Name, u.ID, kubecontainer.ErrResize.Error(), msg
	m.emit.Emit(ctx, ev)
}
