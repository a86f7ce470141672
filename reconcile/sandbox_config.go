package reconcile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/userns"
)

// podLogsDir is <LogDir>/<namespace>_<name>_<uid>, the sandbox's log directory.
func podLogsDir(root, namespace, name, uid string) string {
	return filepath.Join(root, namespace+"_"+name+"_"+uid)
}

// podDataDir is <DataDir>/pods/<uid>.
func (m *Kuberuntime) podDataDir(uid string) string {
	return filepath.Join(m.cfg.DataDir, "pods", uid)
}

// podDirMode is the mode of <DataDir>/pods and of the directories jetlet
// makes in a pod's data dir, as kubelet's pods dir: the emptyDirs (0777) and
// termination message files (0666) below them are open to the pod's
// containers, whatever their uid, and closed to the node's other users.
const podDirMode = 0o750

// makePodDataDir creates the directory elem names within the pod's data dir
// (<DataDir>/pods/<uid>/elem...), each new directory mode 0750, and returns
// its path. It makes <DataDir>/pods 0750 first, whoever created it and with
// whatever mode (a data dir of an older jetlet had it 0755): this package
// does not count on `jetlet run` for it.
func (m *Kuberuntime) makePodDataDir(uid string, elem ...string) (string, error) {
	root := filepath.Join(m.cfg.DataDir, "pods")
	fi, err := os.Stat(root)
	if os.IsNotExist(err) {
		// A data dir made here is the node's other users' business as
		// little as the pods in it.
		if err = os.MkdirAll(m.cfg.DataDir, 0o700); err == nil {
			if err = os.Mkdir(root, podDirMode); os.IsExist(err) {
				err = nil
			}
		}
		if err == nil {
			fi, err = os.Stat(root)
		}
	}
	if err != nil {
		return "", fmt.Errorf("pods dir: %w", err)
	}
	// Mkdir honours the umask; setuid, setgid and sticky bits go too.
	if fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != podDirMode {
		if err := os.Chmod(root, podDirMode); err != nil {
			return "", fmt.Errorf("pods dir: %w", err)
		}
	}
	dir := filepath.Join(append([]string{root, uid}, elem...)...)
	if err := os.MkdirAll(dir, podDirMode); err != nil {
		return "", err
	}
	return dir, nil
}

// namespaceOptions: network and IPC are the pod's or the node's; PID is the
// container's own unless the pod shares it or uses the node's; users are
// userns (kubelet's namespacesForPod).
func namespaceOptions(pod *corev1.Pod, userns *runtimeapi.UserNamespace) *runtimeapi.NamespaceOption {
	ns := &runtimeapi.NamespaceOption{
		Network:       networkNamespaceForPod(pod),
		Pid:           runtimeapi.NamespaceMode_CONTAINER,
		Ipc:           runtimeapi.NamespaceMode_POD,
		UsernsOptions: userns,
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

// withDefaultHostUsers is pod with hostUsers set when it leaves it unset
// and could run in a user namespace (it shares none of the host's
// namespaces, which the API server forbids with hostUsers false, and runs
// no privileged container, which asks for the host's powers). The pod's
// newest sandbox decides, whatever its state, so that a node whose default
// changed neither restarts a running pod nor moves a pod between its
// sandboxes; without one, Config.UserNamespacesByDefault. Other pods are
// returned as they are.
func (m *Kuberuntime) withDefaultHostUsers(pod *corev1.Pod, status *kubecontainer.PodStatus) *corev1.Pod {
	s := &pod.Spec
	if s.HostUsers != nil || s.HostNetwork || s.HostPID || s.HostIPC || hasPrivileged(s) {
		return pod
	}
	hostUsers := !m.cfg.UserNamespacesByDefault
	if status != nil && len(status.SandboxStatuses) > 0 {
		hostUsers = !inUserNamespace(status.SandboxStatuses[0])
	}
	if hostUsers {
		return pod // nil is the host's users
	}
	defaulted := *pod
	defaulted.Spec.HostUsers = &hostUsers
	return &defaulted
}

// hasPrivileged reports whether a container of the pod is privileged.
func hasPrivileged(s *corev1.PodSpec) bool {
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			if sc := cs[i].SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
				return true
			}
		}
	}
	return false
}

// podUserNamespace is the pod's user namespace (kubelet's
// GetOrCreateUserNamespaceMappings): the node's, or with hostUsers false the
// pod's own range, allocated and recorded in its data dir at the first call.
func (m *Kuberuntime) podUserNamespace(pod *corev1.Pod) (*runtimeapi.UserNamespace, error) {
	if !userns.HostUsers(pod) {
		if _, err := m.makePodDataDir(string(pod.UID)); err != nil {
			return nil, err
		}
	}
	return m.userns.Mappings(pod)
}

// generateSandboxConfig builds the sandbox of the pod, as kubelet's
// generatePodSandboxConfig, and the warnings its DNS config makes.
func (m *Kuberuntime) generateSandboxConfig(pod *corev1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, []dnsWarning, error) {
	dns, warnings, err := m.podDNSConfig(pod)
	if err != nil {
		return nil, nil, err
	}
	ns, err := m.podUserNamespace(pod)
	if err != nil {
		return nil, nil, err
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID), Attempt: attempt,
		},
		LogDirectory: podLogsDir(m.cfg.LogDir, pod.Namespace, pod.Name, string(pod.UID)),
		Labels:       newSandboxLabels(pod),
		Annotations:  newSandboxAnnotations(pod),
		DnsConfig:    dns,
	}
	if !pod.Spec.HostNetwork {
		if cfg.Hostname, err = m.kernelHostname(pod); err != nil {
			return nil, nil, err
		}
	}
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			cfg.PortMappings = append(cfg.PortMappings, &runtimeapi.PortMapping{
				Protocol: toProtocol(p.Protocol), ContainerPort: p.ContainerPort, HostPort: p.HostPort, HostIp: p.HostIP,
			})
		}
	}
	sc := &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: namespaceOptions(pod, ns)}
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: sc, Resources: m.podSandboxResources(pod)}
	m.withCgroupParent(cfg, pod)
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
	return cfg, warnings, nil
}
