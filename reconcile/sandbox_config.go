package reconcile

import (
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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
func namespaceOptions(pod *corev1.Pod) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network: networkNamespaceForPod(pod),
		Pid:     runtimeapi.NamespaceMode_CONTAINER,
		Ipc:     runtimeapi.NamespaceMode_POD,
	}
	if pod.Spec.HostIPC {
		ns.Ipc = runtimeapi.NamespaceMode_NODE
	}
	switch {
	case pod.Spec.HostPID:
		ns.Pid = runtimeapi.NamespaceMode_NODE
	case pod.Spec.ShareProcessNamespace != nil && *pod.Spec.ShareProcessNamespace:
		ns.Pid = runtimeapi.NamespaceMode_POD
	}
	return ns
}

// podHostname: spec.hostnameOverride, else spec.hostname, else the pod's
// name cut to 63 characters.
func podHostname(pod *corev1.Pod) string {
	if h := pod.Spec.HostnameOverride; h != nil && *h != "" {
		return *h
	}
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	h := pod.Name
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}

func toProtocol(p corev1.Protocol) runtimeapi.Protocol {
	switch p {
	case corev1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case corev1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// optionalInt64 is the CRI's optional int64: nil when p is.
func optionalInt64(p *int64) *runtimeapi.Int64Value {
	if p == nil {
		return nil
	}
	return &runtimeapi.Int64Value{Value: *p}
}

// generateSandboxConfig builds the sandbox of the pod, as kubelet's
// generatePodSandboxConfig.
func (m *Manager) generateSandboxConfig(pod *corev1.Pod, attempt uint32) *runtimeapi.PodSandboxConfig {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
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
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol: toProtocol(p.Protocol), ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP,
			})
		}
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: namespaceOptions(pod)}
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: sc}
	if psc := pod.Spec.SecurityContext; psc != nil {
		sc.RunAsUser = optionalInt64(psc.RunAsUser)
		sc.RunAsGroup = optionalInt64(psc.RunAsGroup)
		sc.SupplementalGroups = supplementalGroups(psc)
		sc.SupplementalGroupsPolicy = supplementalGroupsPolicy(psc)
		sc.Seccomp = m.seccompProfile(psc.SeccompProfile, nil)
		sc.Apparmor = appArmorProfile(psc.AppArmorProfile, nil)
		sc.SelinuxOptions = seLinuxOptions(psc.SELinuxOptions, nil)
		if len(psc.Sysctls) > 0 {
			cfg.Linux.Sysctls = make(map[string]string, len(psc.Sysctls))
			for _, s := range psc.Sysctls {
				cfg.Linux.Sysctls[s.Name] = s.Value
			}
		}
	}
	return cfg
}
