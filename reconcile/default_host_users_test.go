package reconcile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
)

// The node's default for pods that leave hostUsers unset: a new pod takes
// it; a pod with a sandbox keeps that sandbox's namespace, so a node whose
// default changed (jetlet restarted with another --default-host-users)
// plans no new sandbox for it; a pod that sets hostUsers, shares a host
// namespace or runs a privileged container is left as it is.
func TestWithDefaultHostUsers(t *testing.T) {
	inUserns := func(s *kubecontainer.PodStatus) {
		s.SandboxStatuses[0].Linux.Namespaces.Options.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD}
	}
	noSandbox := func(s *kubecontainer.PodStatus) { s.SandboxStatuses, s.ContainerStatuses = nil, nil }
	tests := []struct {
		name      string
		byDefault bool
		pod       func(*corev1.Pod)
		status    func(*kubecontainer.PodStatus)
		want      *bool // the pod's hostUsers after
		recreate  bool  // the plan makes a new sandbox
	}{
		{name: "default on, new pod: its own user namespace", byDefault: true, status: noSandbox, want: ptr(false), recreate: true},
		{name: "default off, new pod: the host's users", status: noSandbox, want: nil, recreate: true},
		{name: "default on, pod running with the host's users: kept", byDefault: true, want: nil},
		{name: "default off, pod running in its user namespace: kept", status: inUserns, want: ptr(false)},
		{name: "default on, pod whose sandbox died in its user namespace: the next one too", byDefault: true,
			status: func(s *kubecontainer.PodStatus) {
				inUserns(s)
				s.SandboxStatuses[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
			}, want: ptr(false), recreate: true},
		{name: "default on, hostUsers true: the host's", byDefault: true, pod: func(p *corev1.Pod) { p.Spec.HostUsers = ptr(true) }, want: ptr(true)},
		{name: "default off, hostUsers false asked of a host-users sandbox: a new sandbox", pod: func(p *corev1.Pod) { p.Spec.HostUsers = ptr(false) }, want: ptr(false), recreate: true},
		{name: "default on, hostNetwork: the host's", byDefault: true, status: noSandbox, pod: func(p *corev1.Pod) { p.Spec.HostNetwork = true }, want: nil, recreate: true},
		{name: "default on, hostPID: the host's", byDefault: true, status: noSandbox, pod: func(p *corev1.Pod) { p.Spec.HostPID = true }, want: nil, recreate: true},
		{name: "default on, hostIPC: the host's", byDefault: true, status: noSandbox, pod: func(p *corev1.Pod) { p.Spec.HostIPC = true }, want: nil, recreate: true},
		{name: "default on, a privileged container: the host's", byDefault: true, status: noSandbox, pod: func(p *corev1.Pod) {
			p.Spec.Containers[1].SecurityContext = &corev1.SecurityContext{Privileged: ptr(true)}
		}, want: nil, recreate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, status := makeBasePodAndStatus()
			if tt.pod != nil {
				tt.pod(pod)
			}
			if tt.status != nil {
				tt.status(status)
			}
			asked := pod.Spec.HostUsers
			m := &Kuberuntime{cfg: Config{UserNamespacesByDefault: tt.byDefault}}
			got := m.withDefaultHostUsers(pod, status)
			if (got.Spec.HostUsers == nil) != (tt.want == nil) || (tt.want != nil && *got.Spec.HostUsers != *tt.want) {
				t.Errorf("hostUsers %v, want %v", deref(got.Spec.HostUsers), deref(tt.want))
			}
			if pod.Spec.HostUsers != asked {
				t.Errorf("the pod given was changed")
			}
			if a := ComputePodActions(got, status, Probes{}); a.CreateSandbox != tt.recreate {
				t.Errorf("plan %s, want a new sandbox: %v", a, tt.recreate)
			}
		})
	}
}

func deref(b *bool) any {
	if b == nil {
		return "unset"
	}
	return *b
}
