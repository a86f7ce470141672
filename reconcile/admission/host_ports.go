package admission

import (
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
)

// bindAllHostIP is the scheduler's DefaultBindAllHostIP: a host port on it
// (or on no IP) is bound on every address of the node.
const bindAllHostIP = "0.0.0.0"

// hostPort is a host port as the scheduler's HostPortInfo keeps it: an empty
// IP is 0.0.0.0 and an empty protocol TCP.
type hostPort struct {
	ip       string
	protocol corev1.Protocol
	port     int32
}

func (p hostPort) conflicts(other hostPort) bool {
	return p.port == other.port && p.protocol == other.protocol &&
		(p.ip == other.ip || p.ip == bindAllHostIP || other.ip == bindAllHostIP)
}

func (p hostPort) String() string {
	return fmt.Sprintf("%s/%s", net.JoinHostPort(p.ip, strconv.Itoa(int(p.port))), p.protocol)
}

// hostPorts are the host ports the pod binds while it runs: its containers'
// and its sidecars' (restartable init containers), as the scheduler's
// GetHostPorts; an init container that runs to completion holds none.
func hostPorts(pod *corev1.Pod) []hostPort {
	var ports []hostPort
	add := func(c *corev1.Container) {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			hp := hostPort{ip: p.HostIP, protocol: p.Protocol, port: p.HostPort}
			if hp.ip == "" {
				hp.ip = bindAllHostIP
			}
			if hp.protocol == "" {
				hp.protocol = corev1.ProtocolTCP
			}
			ports = append(ports, hp)
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; kubecontainer.IsSidecar(c) {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return ports
}

// checkHostPorts refuses a pod wanting a host port an active pod holds: the
// same protocol and port, on the same IP or where either is 0.0.0.0.
func checkHostPorts(_ *Node, pod *corev1.Pod, held *Held) Verdict {
	for _, want := range hostPorts(pod) {
		for _, used := range held.ports[portKey{want.protocol, want.port}] {
			if used.uid == pod.UID || !want.conflicts(used.port) {
				continue
			}
			other := held.parts[used.uid].pod
			return Verdict{
				Reason: ReasonNodePorts,
				Message: fmt.Sprintf("Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: "+
					"hostPort %s conflicts with %s of pod %s/%s", want, used.port, other.Namespace, other.Name),
			}
		}
	}
	return admitted
}
