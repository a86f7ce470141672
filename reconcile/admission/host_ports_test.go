package admission

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestHostPorts(t *testing.T) {
	const prefix = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: "
	port := func(hostIP string, protocol corev1.Protocol, hostPort int32) corev1.ContainerPort {
		return corev1.ContainerPort{ContainerPort: 80, HostIP: hostIP, Protocol: protocol, HostPort: hostPort}
	}
	tests := []struct {
		name       string
		want, used []corev1.ContainerPort
		usedBy     string // "init" or "sidecar": the active pod holds used in such an init container
		message    string // after prefix; "" is admitted
	}{
		{name: "no host ports", want: []corev1.ContainerPort{{ContainerPort: 80}}, used: []corev1.ContainerPort{{ContainerPort: 80}}},
		{
			name:    "the same port, defaults: TCP on 0.0.0.0",
			want:    []corev1.ContainerPort{port("", "", 8080)},
			used:    []corev1.ContainerPort{port("", "", 8080)},
			message: "hostPort 0.0.0.0:8080/TCP conflicts with 0.0.0.0:8080/TCP of pod default/other",
		},
		{name: "another port", want: []corev1.ContainerPort{port("", "", 8080)}, used: []corev1.ContainerPort{port("", "", 8081)}},
		{
			name: "TCP and UDP do not conflict",
			want: []corev1.ContainerPort{port("", corev1.ProtocolUDP, 53)},
			used: []corev1.ContainerPort{port("", corev1.ProtocolTCP, 53)},
		},
		{
			name:    "UDP and UDP do",
			want:    []corev1.ContainerPort{port("", corev1.ProtocolUDP, 53)},
			used:    []corev1.ContainerPort{port("", corev1.ProtocolUDP, 53)},
			message: "hostPort 0.0.0.0:53/UDP conflicts with 0.0.0.0:53/UDP of pod default/other",
		},
		{
			name: "two IPs do not conflict",
			want: []corev1.ContainerPort{port("10.0.0.1", "", 8080)},
			used: []corev1.ContainerPort{port("10.0.0.2", "", 8080)},
		},
		{
			name:    "the same IP does",
			want:    []corev1.ContainerPort{port("10.0.0.1", "", 8080)},
			used:    []corev1.ContainerPort{port("10.0.0.1", corev1.ProtocolTCP, 8080)},
			message: "hostPort 10.0.0.1:8080/TCP conflicts with 10.0.0.1:8080/TCP of pod default/other",
		},
		{
			name:    "0.0.0.0 wanted conflicts with any IP",
			want:    []corev1.ContainerPort{port("0.0.0.0", "", 8080)},
			used:    []corev1.ContainerPort{port("10.0.0.2", "", 8080)},
			message: "hostPort 0.0.0.0:8080/TCP conflicts with 10.0.0.2:8080/TCP of pod default/other",
		},
		{
			name:    "an IP wanted conflicts with 0.0.0.0 used",
			want:    []corev1.ContainerPort{port("10.0.0.1", "", 8080)},
			used:    []corev1.ContainerPort{port("", "", 8080)},
			message: "hostPort 10.0.0.1:8080/TCP conflicts with 0.0.0.0:8080/TCP of pod default/other",
		},
		{
			name:    "IPv6",
			want:    []corev1.ContainerPort{port("fd00::1", "", 8080)},
			used:    []corev1.ContainerPort{port("fd00::1", "", 8080)},
			message: "hostPort [fd00::1]:8080/TCP conflicts with [fd00::1]:8080/TCP of pod default/other",
		},
		{
			name:    "a sidecar's port is held",
			want:    []corev1.ContainerPort{port("", "", 8080)},
			used:    []corev1.ContainerPort{port("", "", 8080)},
			usedBy:  "sidecar",
			message: "hostPort 0.0.0.0:8080/TCP conflicts with 0.0.0.0:8080/TCP of pod default/other",
		},
		{
			name:   "an init container's port is not",
			want:   []corev1.ContainerPort{port("", "", 8080)},
			used:   []corev1.ContainerPort{port("", "", 8080)},
			usedBy: "init",
		},
	}
	for _, tt := range tests {
		pod := testPod("web")
		pod.Spec.Containers[0].Ports = tt.want
		other := testPod("other")
		switch tt.usedBy {
		case "":
			other.Spec.Containers[0].Ports = tt.used
		case "sidecar", "init":
			c := restrictedContainer(tt.usedBy)
			c.Ports = tt.used
			if tt.usedBy == "sidecar" {
				c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
			}
			other.Spec.InitContainers = []corev1.Container{c}
		}
		active := []*corev1.Pod{testPod("idle"), other}
		message := tt.message
		if message != "" {
			message = prefix + message
		}
		assertVerdict(t, tt.name, checkHostPorts(testNode(), pod, NewHeld(active...)), ReasonNodePorts, message)
	}
}

// TestHostPortsOfSidecarsWanted: the new pod's sidecars want their host
// ports as its containers do.
func TestHostPortsOfSidecarsWanted(t *testing.T) {
	pod := testPod("web")
	sidecar := restrictedContainer("proxy")
	sidecar.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	sidecar.Ports = []corev1.ContainerPort{{ContainerPort: 15001, HostPort: 15001}}
	pod.Spec.InitContainers = []corev1.Container{sidecar}
	other := testPod("other")
	other.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 15001, HostPort: 15001}}
	v := checkHostPorts(testNode(), pod, NewHeld(other))
	if v.Reason != ReasonNodePorts {
		t.Errorf("got %+v, want refused with %s", v, ReasonNodePorts)
	}
}
