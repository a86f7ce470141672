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
	n := 0
	if h.Exec != nil {
		n++
		validateExec(e, p+".exec", h.Exec)
	}
	if h.HTTPGet != nil {
		n++
		validateHTTPGet(e, p+".httpGet", h.HTTPGet)
	}
	if h.TCPSocket != nil {
		n++
		validatePortRef(e, p+".tcpSocket.port", h.TCPSocket.Port)
	}
	if h.GRPC != nil {
		n++
		if h.GRPC.Port < 1 || h.GRPC.Port > 65535 {
			e.invalid(p+".grpc.port", "must be between 1 and 65535")
		}
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

func validateExec(e *errs, p string, x *corev1.ExecAction) {
	if len(x.Command) == 0 {
		e.invalid(p+".command", "required")
	}
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

// validatePortRef checks a probe's port: a number in range or a port name.
func validatePortRef(e *errs, p string, port intstr.IntOrString) {
	if port.Type == intstr.String {
		if !isPortName(port.StrVal) {
			e.invalid(p, "must be a port number between 1 and 65535 or an IANA service name")
		}
		return
	}
	if port.IntVal < 1 || port.IntVal > 65535 {
		e.invalid(p, "must be between 1 and 65535")
	}
}
