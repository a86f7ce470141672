package reconcile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/internal/etchosts"
)

const etcHostsPath = "/etc/hosts"

// etcHostsMount is the container's /etc/hosts as kubelet's makeHostsMount
// makes it: a file in the pod's data dir (etc-hosts), written again at each
// container creation, holding the pod's own names and its hostAliases. None
// when a volume mount already takes /etc/hosts, or when the pod has neither
// an IP nor the node's network (kubelet's rule: without an IP, its names
// would name nothing; jetlet's embedded runtime gives every pod one).
func (m *Kuberuntime) etcHostsMount(pod *corev1.Pod, c *corev1.Container, net podNetwork) (*runtimeapi.Mount, error) {
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == etcHostsPath {
			return nil, nil
		}
	}
	if len(net.podIPs) == 0 && !pod.Spec.HostNetwork {
		return nil, nil
	}
	var content []byte
	if pod.Spec.HostNetwork {
		host, err := os.ReadFile(m.cfg.HostsFile)
		if err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("read the node's hosts file: %w", err)
		}
		content = hostNetworkHostsFile(host, pod.Spec.HostAliases)
	} else {
		hostname, domain := m.podHostnameAndDomain(pod)
		content = managedHostsFile(net.podIPs, hostname, domain, pod.Spec.HostAliases)
	}
	dir, err := m.makePodDataDir(string(pod.UID))
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "etc-hosts")
	if err := atomicfile.Replace(file, content, 0o644); err != nil {
		return nil, fmt.Errorf("write the pod's hosts file: %w", err)
	}
	return &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: file}, nil
}

// managedHostsFile is the hosts file of a pod with a network of its own,
// kubelet's managedHostsFileContent: localhost's names, the pod's hostname
// (qualified with its domain, if any) at each of its IPs, its hostAliases.
func managedHostsFile(ips []string, hostname, domain string, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file.\n")
	b.WriteString(etchosts.Localhost)
	for _, ip := range ips {
		if domain != "" {
			fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
		} else {
			fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
		}
	}
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// hostNetworkHostsFile is the hosts file of a pod on the node's network,
// kubelet's nodeHostsFileContent: the node's, then the pod's hostAliases.
func hostNetworkHostsFile(node []byte, aliases []corev1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString("# Kubernetes-managed hosts file (host network).\n")
	b.Write(node)
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

func hostAliasEntries(aliases []corev1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
	}
	return b.Bytes()
}
