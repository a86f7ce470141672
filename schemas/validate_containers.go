package schemas

import (
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// validateContainer checks one container of the pod's spec s, an init
// container when init is true: names holds the container names seen before
// it (it adds its own), volumes the pod's volume names.
func validateContainer(e *errs, p string, c *corev1.Container, init bool, names, volumes map[string]bool, s *corev1.PodSpec) {
	validateContainerName(e, p, c.Name, names)
	validateImage(e, p, c.Image, c.ImagePullPolicy)
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	default:
		e.invalid(p+".terminationMessagePolicy", `must be "File" or "FallbackToLogsOnError"`)
	}
	validateContainerRestartPolicy(e, p, c, init)

	validatePorts(e, p, c.Ports, s.HostNetwork)
	validateEnv(e, p, c, s)
	validateResources(e, p+".resources", &c.Resources)
	validateResizePolicy(e, p, c.ResizePolicy)

	validateContainerSecurityContext(e, p, c.SecurityContext, s.HostUsers)
	rejectEphemeralStorageLimit(e, p, c.Resources.Limits)
	privileged := isPrivileged(c.SecurityContext)
	validatePrivileged(e, p, c.SecurityContext)

	validateMounts(e, p, c.VolumeMounts, volumes, privileged)
	if len(c.VolumeDevices) > 0 {
		e.unsupported(p+".volumeDevices", "block volumes need a persistentVolumeClaim, which this node does not support")
	}

	if init && !isAlways(c.RestartPolicy) { // not a sidecar
		rejectInitContainerHandlers(e, p, c)
	}
	validateProbes(e, p, c)
	if c.Lifecycle != nil {
		validateLifecycle(e, p, c.Lifecycle)
	}
}

// validateContainerName checks a container's name, unique across init and
// app containers (names holds those seen before it; it adds its own).
func validateContainerName(e *errs, p, name string, names map[string]bool) {
	switch {
	case name == "":
		e.invalid(p+".name", "required")
	case !isDNSLabel(name):
		e.invalid(p+".name", "must be a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters)")
	case names[name]:
		e.invalid(p+".name", "duplicate container name "+strconv.Quote(name)+" (names are unique across initContainers and containers)")
	}
	names[name] = true
}

func validateImage(e *errs, p, image string, pull corev1.PullPolicy) {
	switch {
	case image == "":
		e.invalid(p+".image", "required")
	case strings.TrimSpace(image) != image:
		e.invalid(p+".image", "must not have leading or trailing white space")
	}
	switch pull {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		e.invalid(p+".imagePullPolicy", `must be "Always", "IfNotPresent" or "Never"`)
	}
}

// isAlways reports whether a container's restartPolicy is Always: on an
// init container, that makes it a sidecar.
func isAlways(r *corev1.ContainerRestartPolicy) bool {
	return r != nil && *r == corev1.ContainerRestartPolicyAlways
}

// validateContainerRestartPolicy checks restartPolicy, which only a sidecar
// may set, and refuses restartPolicyRules.
func validateContainerRestartPolicy(e *errs, p string, c *corev1.Container, init bool) {
	if c.RestartPolicy != nil {
		switch {
		case !init:
			e.unsupported(p+".restartPolicy", "per-container restart policies are supported on init containers (sidecars) only")
		case !isAlways(c.RestartPolicy):
			e.invalid(p+".restartPolicy", `must be "Always" (a sidecar) when set on an init container`)
		}
	}
	if len(c.RestartPolicyRules) > 0 {
		e.unsupported(p+".restartPolicyRules", "container restart rules are not supported by this node")
	}
}

// rejectInitContainerHandlers reports the probes and hooks of an init
// container that is not a sidecar: it runs to completion before anything
// could use them.
func rejectInitContainerHandlers(e *errs, p string, c *corev1.Container) {
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"livenessProbe", c.LivenessProbe != nil}, {"readinessProbe", c.ReadinessProbe != nil},
		{"startupProbe", c.StartupProbe != nil}, {"lifecycle", c.Lifecycle != nil},
	} {
		if f.set {
			e.invalid(p+"."+f.name, "may not be set on an init container unless its restartPolicy is \"Always\"")
		}
	}
}

func validatePorts(e *errs, p string, ports []corev1.ContainerPort, hostNetwork bool) {
	seen := map[string]bool{}
	for i, port := range ports {
		pp := idx(p+".ports", i)
		if !isPortNumber(port.ContainerPort) {
			e.invalid(pp+".containerPort", "must be between 1 and 65535")
		}
		if port.HostPort < 0 || port.HostPort > 65535 {
			e.invalid(pp+".hostPort", "must be between 1 and 65535, or 0 for none")
		}
		if hostNetwork && port.HostPort != 0 && port.HostPort != port.ContainerPort {
			e.invalid(pp+".hostPort", "must equal containerPort when hostNetwork is true")
		}
		switch port.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			e.invalid(pp+".protocol", `must be "TCP", "UDP" or "SCTP"`)
		}
		if port.Name != "" {
			if !isPortName(port.Name) {
				e.invalid(pp+".name", "must be an IANA service name (at most 15 lowercase letters, digits and single '-', with a letter)")
			} else if seen[port.Name] {
				e.invalid(pp+".name", "duplicate port name "+strconv.Quote(port.Name))
			}
			seen[port.Name] = true
		}
		if port.HostIP != "" {
			if _, err := netip.ParseAddr(port.HostIP); err != nil {
				e.invalid(pp+".hostIP", "must be an IP address")
			}
		}
	}
}
