package schemas

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// validateProbes checks a container's liveness, readiness and startup
// probes.
func validateProbes(e *errs, p string, c *corev1.Container) {
	if c.LivenessProbe != nil {
		validateProbe(e, p+".livenessProbe", c.LivenessProbe, true)
	}
	if c.ReadinessProbe != nil {
		validateProbe(e, p+".readinessProbe", c.ReadinessProbe, false)
		if c.ReadinessProbe.TerminationGracePeriodSeconds != nil {
			e.invalid(p+".readinessProbe.terminationGracePeriodSeconds", "must not be set on a readiness probe")
		}
	}
	if c.StartupProbe != nil {
		validateProbe(e, p+".startupProbe", c.StartupProbe, true)
	}
}

func validateProbe(e *errs, p string, pr *corev1.Probe, mustSucceedOnce bool) {
	h := &pr.ProbeHandler
	n := validateExecAndHTTPGet(e, p, h.Exec, h.HTTPGet)
	if h.TCPSocket != nil {
		n++
		validatePortRef(e, p+".tcpSocket.port", h.TCPSocket.Port)
	}
	if h.GRPC != nil {
		n++
		validatePortRef(e, p+".grpc.port", intstr.FromInt32(h.GRPC.Port))
		if h.GRPC.Mode != nil && *h.GRPC.Mode != corev1.GRPCProbeModePlaintext {
			e.unsupported(p+".grpc.mode", `this node's gRPC probes connect in plain text only ("Plaintext")`)
		}
	}
	if n != 1 {
		e.invalid(p, "must specify exactly one handler of exec, httpGet, tcpSocket and grpc")
	}
	for _, f := range []struct {
		name string
		v    int32
	}{
		{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds},
		{"periodSeconds", pr.PeriodSeconds}, {"successThreshold", pr.SuccessThreshold},
		{"failureThreshold", pr.FailureThreshold},
	} {
		if f.v < 0 {
			e.invalid(p+"."+f.name, "must be >= 0")
		}
	}
	if mustSucceedOnce && pr.SuccessThreshold > 1 {
		e.invalid(p+".successThreshold", "must be 1 for liveness and startup probes")
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil && *g < 1 {
		e.invalid(p+".terminationGracePeriodSeconds", "must be a positive integer")
	}
}

// validateExecAndHTTPGet checks the handlers probes and lifecycle hooks
// share (p is the probe's or the hook's path) and returns how many of the
// two are set; each counts its others and asks for exactly one in all.
func validateExecAndHTTPGet(e *errs, p string, exec *corev1.ExecAction, httpGet *corev1.HTTPGetAction) (set int) {
	if exec != nil {
		set++
		if len(exec.Command) == 0 {
			e.invalid(p+".exec.command", "required")
		}
	}
	if httpGet != nil {
		set++
		validateHTTPGet(e, p+".httpGet", httpGet)
	}
	return set
}

func validateHTTPGet(e *errs, p string, h *corev1.HTTPGetAction) {
	validatePortRef(e, p+".port", h.Port)
	if h.Scheme != corev1.URISchemeHTTP && h.Scheme != corev1.URISchemeHTTPS {
		e.invalid(p+".scheme", `must be "HTTP" or "HTTPS"`)
	}
	if h.Protocol != nil && *h.Protocol != corev1.HTTPProtocolHTTP1 {
		e.unsupported(p+".protocol", `this node's handlers speak HTTP/1.1 only ("HTTP1")`)
	}
}

// validatePortRef checks a handler's port: a number in range or a port name.
func validatePortRef(e *errs, p string, port intstr.IntOrString) {
	if port.Type == intstr.String {
		if !isPortName(port.StrVal) {
			e.invalid(p, "must be a port number between 1 and 65535 or an IANA service name")
		}
		return
	}
	if !isPortNumber(port.IntVal) {
		e.invalid(p, "must be between 1 and 65535")
	}
}
