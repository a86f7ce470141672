package reconcile

import (
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// toContainerState is kubelet's toKubeContainerState.
func toContainerState(s runtimeapi.ContainerState) kubecontainer.ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return kubecontainer.ContainerCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return kubecontainer.ContainerRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return kubecontainer.ContainerExited
	}
	return kubecontainer.ContainerUnknown
}

// sandboxToContainerState is kubelet's SandboxToContainerState: a ready
// sandbox runs, any other has exited.
func sandboxToContainerState(s runtimeapi.PodSandboxState) kubecontainer.ContainerState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return kubecontainer.ContainerRunning
	}
	return kubecontainer.ContainerExited
}

// podIPs are the sandbox's IPs, the primary first; none without a primary.
// A sandbox on the node's network that the runtime gives no address
// (containerd gives none) has the node's, as kubelet gives hostNetwork pods.
func podIPs(s *runtimeapi.PodSandboxStatus, nodeIP string) []string {
	network := s.GetNetwork()
	if network.GetIp() == "" {
		if nodeIP != "" && s.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE {
			return []string{nodeIP}
		}
		return nil
	}
	ips := make([]string, 0, 1+len(network.GetAdditionalIps()))
	ips = append(ips, network.GetIp())
	for _, ip := range network.GetAdditionalIps() {
		ips = append(ips, ip.GetIp())
	}
	return ips
}
