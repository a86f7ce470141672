package schemas

import (
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

func validateContainer(e *errs, p string, c *corev1.Container, init bool, names, volumes map[string]bool, s *corev1.PodSpec, allowPrivileged bool) {
	switch {
	case c.Name == "":
		e.invalid(p+".name", "required")
	case !isDNSLabel(c.Name):
		e.invalid(p+".name", "must be a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters)")
	case names[c.Name]:
		e.invalid(p+".name", "duplicate container name "+strconv.Quote(c.Name)+" (names are unique across initContainers and containers)")
	}
	names[c.Name] = true

	switch {
	case c.Image == "":
		e.invalid(p+".image", "required")
	case strings.TrimSpace(c.Image) != c.Image:
		e.invalid(p+".image", "must not have leading or trailing white space")
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		e.invalid(p+".imagePullPolicy", `must be "Always", "IfNotPresent" or "Never"`)
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	default:
		e.invalid(p+".terminationMessagePolicy", `must be "File" or "FallbackToLogsOnError"`)
	}

	sidecar := false
	if c.RestartPolicy != nil {
		switch {
		case !init:
			e.unsupported(p+".restartPolicy", "per-container restart policies are supported on init containers (sidecars) only")
		case *c.RestartPolicy == corev1.ContainerRestartPolicyAlways:
			sidecar = true
		default:
			e.invalid(p+".restartPolicy", `must be "Always" (a sidecar) when set on an init container`)
		}
	}
	if len(c.RestartPolicyRules) > 0 {
		e.unsupported(p+".restartPolicyRules", "container restart rules are not supported by this node")
	}

	validatePorts(e, p, c.Ports, s.HostNetwork)
	validateEnv(e, p, c, s)
	validateResources(e, p+".resources", &c.Resources)
	for i, r := range c.ResizePolicy {
		rp := idx(p+".resizePolicy", i)
		if r.ResourceName != corev1.ResourceCPU && r.ResourceName != corev1.ResourceMemory {
			e.invalid(rp+".resourceName", `must be "cpu" or "memory"`)
		}
		if r.RestartPolicy != corev1.NotRequired && r.RestartPolicy != corev1.RestartContainer {
			e.invalid(rp+".restartPolicy", `must be "NotRequired" or "RestartContainer"`)
		}
	}

	if sc := c.SecurityContext; sc != nil {
		validateProfiles(e, p+".securityContext", sc.SeccompProfile, sc.AppArmorProfile)
		if sc.WindowsOptions != nil {
			e.unsupported(p+".securityContext.windowsOptions", "this node runs linux pods only")
		}
		if sc.ProcMount != nil && *sc.ProcMount == corev1.UnmaskedProcMount {
			e.unsupported(p+".securityContext.procMount", `"Unmasked" needs a user namespace, which this node does not give pods`)
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
		e.unsupported(p+".resources.limits[ephemeral-storage]", "this node does not evict pods for local storage use")
	}

	privileged := c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged
	if privileged && !allowPrivileged {
		e.unsupported(p+".securityContext.privileged", "privileged containers are not allowed on this node (jetlet run --allow-privileged)")
	}
	if privileged && c.SecurityContext.AllowPrivilegeEscalation != nil && !*c.SecurityContext.AllowPrivilegeEscalation {
		e.invalid(p+".securityContext.allowPrivilegeEscalation", "cannot be false for a privileged container")
	}

	validateMounts(e, p, c.VolumeMounts, volumes, privileged)
	if len(c.VolumeDevices) > 0 {
		e.unsupported(p+".volumeDevices", "block volumes need a persistentVolumeClaim, which this node does not support")
	}

	if init && !sidecar {
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
	if l := c.Lifecycle; l != nil {
		if l.PostStart != nil {
			validateLifecycleHandler(e, p+".lifecycle.postStart", l.PostStart)
		}
		if l.PreStop != nil {
			validateLifecycleHandler(e, p+".lifecycle.preStop", l.PreStop)
		}
		if l.StopSignal != nil && !stopSignalRE.MatchString(string(*l.StopSignal)) {
			e.invalid(p+".lifecycle.stopSignal", "must be a Linux signal name such as SIGTERM, SIGUSR1 or SIGRTMIN+1")
		}
	}
}

func validatePorts(e *errs, p string, ports []corev1.ContainerPort, hostNetwork bool) {
	seen := map[string]bool{}
	for i, port := range ports {
		pp := idx(p+".ports", i)
		if port.ContainerPort < 1 || port.ContainerPort > 65535 {
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
