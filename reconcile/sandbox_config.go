package reconcile

import (
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// podLogsDir is <LogDir>/<namespace>_<name>_<uid>, the sandbox's log directory.
func podLogsDir(root, namespace, name, uid string) string {
	return filepath.Join(root, namespace+"_"+name+"_"+uid)
}

// podDataDir is <DataDir>/pods/<uid>.
func (m *Manager) podDataDir(uid string) string {
	return filepath.Join(m.cfg.DataDir, "pods", uid)
}

// namespaceOptions: network and IPC are the pod's or the node's; PID is the
// container's own unless the pod shares it or uses the node's.
func namespaceOptions(pod *corev1.Pod) NamespaceOptions {
	ns := NamespaceOptions{Network: NamespacePod, PID: NamespaceContainer, IPC: NamespacePod}
	if pod.Spec.HostNetwork {
		ns.Network = NamespaceNode
	}
	if pod.Spec.HostIPC {
		ns.IPC = NamespaceNode
	}
	switch {
	case pod.Spec.HostPID:
		ns.PID = NamespaceNode
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.PID = NamespacePod
	}
	return ns
}

// podHostname: spec.hostname, else the pod's name cut to 63 characters.
func podHostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	h := pod.Name
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

func toProtocol(p corev1.Protocol) Protocol {
	switch p {
	case corev1.ProtocolUDP:
		return ProtocolUDP
	case corev1.ProtocolSCTP:
		return ProtocolSCTP
	}
	return ProtocolTCP
}

// generateSandboxConfig builds the sandbox of the pod, as kubelet's
// generatePodSandboxConfig.
func (m *Manager) generateSandboxConfig(pod *corev1.Pod, attempt uint32) *SandboxConfig {
	cfg := &SandboxConfig{
		Metadata: SandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID), Attempt: attempt,
		},
		LogDirectory: podLogsDir(m.cfg.LogDir, pod.Namespace, pod.Name, string(pod.UID)),
		Labels:       newSandboxLabels(pod),
		Annotations:  newSandboxAnnotations(pod),
	}
	if !pod.Spec.HostNetwork {
		cfg.Hostname = podHostname(pod)
	}
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			cfg.PortMappings = append(cfg.PortMappings, PortMapping{
				Protocol: toProtocol(p.Protocol), ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIP: p.HostIP,
			})
		}
	}
	cfg.SecurityContext.NamespaceOptions = namespaceOptions(pod)
	if sc := pod.Spec.SecurityContext; sc != nil {
		cfg.SecurityContext.RunAsUser = sc.RunAsUser
		cfg.SecurityContext.RunAsGroup = sc.RunAsGroup
		cfg.SecurityContext.SupplementalGroups = sc.SupplementalGroups
		if len(sc.Sysctls) > 0 {
			cfg.Sysctls = make(map[string]string, len(sc.Sysctls))
			for _, s := range sc.Sysctls {
				cfg.Sysctls[s.Name] = s.Value
			}
		}
	}
	return cfg
}
