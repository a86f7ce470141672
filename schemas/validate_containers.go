package schemas

import (
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas/imageref"
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
	default:
		// kubelet finds it only once the pod's sandbox runs (its container
		// waits with InvalidImageName); refused here, no sandbox is made.
		if _, err := imageref.Parse(image); err != nil {
			e.invalid(p+".image", "not an image reference the runtime can pull (kubelet's InvalidImageName): "+err.Error())
		}
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

// The API server's limits on a container's restart rules.
const (
	maxRestartRules         = 20
	maxRestartRuleExitCodes = 255
)

// validateContainerRestartPolicy checks a container's restartPolicy and
// restartPolicyRules as the API server does (ContainerRestartRules): any
// container may set restartPolicy Always, OnFailure or Never (on an init
// container, Always makes it a sidecar); rules need restartPolicy set and
// may not be set on a sidecar. The node refuses what it cannot act on: the
// RestartAllContainers action, and rules on an init container, which kubelet
// does not evaluate (a failed init container follows its restartPolicy).
func validateContainerRestartPolicy(e *errs, p string, c *corev1.Container, init bool) {
	if c.RestartPolicy != nil {
		switch *c.RestartPolicy {
		case corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever:
		default:
			e.invalid(p+".restartPolicy", `must be "Always", "OnFailure" or "Never"`)
		}
	}
	if len(c.RestartPolicyRules) == 0 {
		return
	}
	rp := p + ".restartPolicyRules"
	switch {
	case init && isAlways(c.RestartPolicy):
		e.invalid(rp, `may not be set on a sidecar (an init container whose restartPolicy is "Always")`)
		return
	case init:
		e.unsupported(rp, "restart rules on an init container are not evaluated by kubelet, nor by this node (its restartPolicy decides)")
		return
	case c.RestartPolicy == nil:
		e.invalid(p+".restartPolicy", "required when restartPolicyRules are set")
	}
	if len(c.RestartPolicyRules) > maxRestartRules {
		e.invalid(rp, "must have at most "+strconv.Itoa(maxRestartRules)+" rules")
	}
	for i, r := range c.RestartPolicyRules {
		pr := idx(rp, i)
		switch r.Action {
		case corev1.ContainerRestartRuleActionRestart:
		case corev1.ContainerRestartRuleActionRestartAllContainers:
			e.unsupported(pr+".action", `"RestartAllContainers" is not supported by this node (only "Restart")`)
		default:
			e.invalid(pr+".action", `must be "Restart"`)
		}
		if r.ExitCodes == nil {
			e.invalid(pr+".exitCodes", "required")
			continue
		}
		switch r.ExitCodes.Operator {
		case corev1.ContainerRestartRuleOnExitCodesOpIn, corev1.ContainerRestartRuleOnExitCodesOpNotIn:
		default:
			e.invalid(pr+".exitCodes.operator", `must be "In" or "NotIn"`)
		}
		if len(r.ExitCodes.Values) > maxRestartRuleExitCodes {
			e.invalid(pr+".exitCodes.values", "must have at most "+strconv.Itoa(maxRestartRuleExitCodes)+" values")
		}
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
