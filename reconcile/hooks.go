package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime/crilabels"
	"github.com/jetlet/jetlet/schemas"
)

// errNoHandlerRunner: a hook needs a handler runner (exec, httpGet) and the
// manager was given none.
var errNoHandlerRunner = errors.New("this node has no lifecycle handler runner (reconcile.Config.Handlers)")

// runHook runs a lifecycle handler (postStart or preStop) against the running
// instance id of c, after kubelet's lifecycle handlerRunner.Run: exec and
// httpGet through the handler runner, sleep here. It returns the failure's
// message, or "" when the handler succeeded. ctx bounds it (a preStop's grace
// period); no handler has a timeout of its own, as kubelet's.
func (s *podOperation) runHook(ctx context.Context, id string, c *corev1.Container, h *corev1.LifecycleHandler) string {
	m := s.m
	if m.cfg.Handlers == nil && (h.Exec != nil || h.HTTPGet != nil) {
		return fmt.Sprintf("lifecycle hook for Container %q in Pod %q failed - error: %v", c.Name, s.podName(), errNoHandlerRunner)
	}
	switch {
	case h.Exec != nil:
		out, err := m.cfg.Handlers.Exec(ctx, id, h.Exec.Command, 0)
		if err == nil && out.OK {
			return ""
		}
		if err == nil {
			err = errors.New("command exited non-zero")
		}
		return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q", h.Exec.Command, c.Name, s.podName(), err, out.Message)
	case h.HTTPGet != nil:
		u, header, err := kubecontainer.ResolveHTTPGet(h.HTTPGet, c, s.hookHost())
		if err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", h.HTTPGet.Path, c.Name, s.podName(), err)
		}
		out, err := m.cfg.Handlers.HTTPGet(ctx, u, header, 0)
		if err == nil && out.OK {
			return ""
		}
		if err == nil {
			err = errors.New(out.Message)
		}
		return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v", h.HTTPGet.Path, c.Name, s.podName(), err)
	case h.Sleep != nil:
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			// A preStop's grace period ran out: the stop goes on, as kubelet's.
		}
		return ""
	}
	return fmt.Sprintf("lifecycle hook for Container %q in Pod %q: no handler this node can run", c.Name, s.podName())
}

func (s *podOperation) podName() string { return s.ref.Namespace + "/" + s.ref.Name }

// hookHost is where an httpGet hook without a host goes: the pod's IP, else
// (a host-network pod) the node's, else localhost, which is the node then.
func (s *podOperation) hookHost() string {
	switch {
	case s.net.podIP != "":
		return s.net.podIP
	case len(s.status.IPs) > 0:
		return s.status.IPs[0]
	case s.m.cfg.NodeIP != "":
		return s.m.cfg.NodeIP
	}
	return "127.0.0.1"
}

// runPostStart runs c's postStart hook after the instance started; on failure
// it emits FailedPostStartHook, kills the instance (reason
// FailedPostStartHook) and returns the message, as kubelet's startContainer.
func (s *podOperation) runPostStart(ctx context.Context, cs *kubecontainer.ContainerStatus, c *corev1.Container) string {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return ""
	}
	msg := s.runHook(ctx, cs.ID, c, c.Lifecycle.PostStart)
	if msg == "" {
		return ""
	}
	s.m.containerEvent(ctx, s.ref, kubecontainer.InstanceOf(cs), schemas.EventFailedPostStartHook, schemas.ReasonFailedPostStartHook, msg)
	if err := s.killContainer(ctx, cs, c, killing{reason: schemas.ReasonFailedPostStartHook, message: msg}); err != nil {
		s.m.log.Warn().Err(err).Str("container", cs.ID).Msg("kill container whose postStart hook failed")
	}
	return msg
}

// runPreStop runs the instance's preStop hook (from spec, else the one
// recorded on the instance) within grace seconds and returns how many whole
// seconds it took, as kubelet's executePreStopHook. A failure emits
// FailedPreStopHook; the kill goes on either way.
func (s *podOperation) runPreStop(ctx context.Context, cs *kubecontainer.ContainerStatus, spec *corev1.Container, grace int64) int64 {
	h := cs.PreStop
	c := &corev1.Container{Name: cs.Name}
	if spec != nil {
		c, h = spec, nil
		if spec.Lifecycle != nil {
			h = spec.Lifecycle.PreStop
		}
	}
	if h == nil || grace <= 0 {
		return 0
	}
	start := s.m.cfg.Clock.Now()
	hookCtx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second)
	defer cancel()
	if msg := s.runHook(hookCtx, cs.ID, c, h); msg != "" {
		s.m.containerEvent(ctx, s.ref, kubecontainer.InstanceOf(cs), schemas.EventFailedPreStopHook, "", msg)
	}
	return int64(s.m.cfg.Clock.Now().Sub(start) / time.Second)
}

// preStopAnnotation records a container's preStop handler on its instances,
// so that a kill without the spec (an orphan, a restarted jetlet's delete of
// metadata only) still runs it, as kubelet's
// io.kubernetes.container.preStopHandler.
func preStopAnnotation(c *corev1.Container) (string, bool) {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return "", false
	}
	b, err := json.Marshal(c.Lifecycle.PreStop)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// preStopFromAnnotations reads the handler preStopAnnotation recorded.
func preStopFromAnnotations(ann map[string]string) *corev1.LifecycleHandler {
	v, ok := ann[crilabels.AnnotationContainerPreStopHandler]
	if !ok {
		return nil
	}
	var h corev1.LifecycleHandler
	if json.Unmarshal([]byte(v), &h) != nil {
		return nil
	}
	return &h
}

// stopSignal is the CRI form of lifecycle.stopSignal (SIGRTMIN+1 is
// SIGNAL_SIGRTMINPLUS1); unset is the runtime's default (the image's, else
// SIGTERM). A name the CRI does not know is an error, never the default.
func stopSignal(c *corev1.Container) (runtimeapi.Signal, error) {
	if c.Lifecycle == nil || c.Lifecycle.StopSignal == nil {
		return runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT, nil
	}
	name := strings.NewReplacer("+", "PLUS", "-", "MINUS").Replace(string(*c.Lifecycle.StopSignal))
	v, ok := runtimeapi.Signal_value["SIGNAL_"+name]
	if !ok {
		return 0, fmt.Errorf("container %q: lifecycle.stopSignal %q is not a signal the CRI knows", c.Name, *c.Lifecycle.StopSignal)
	}
	return runtimeapi.Signal(v), nil
}
