package admission

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func TestParseLevel(t *testing.T) {
	for _, s := range []string{"privileged", "baseline", "restricted"} {
		if l, err := ParseLevel(s); err != nil || string(l) != s {
			t.Errorf("ParseLevel(%q) = %q, %v", s, l, err)
		}
	}
	for _, s := range []string{"", "Baseline", "restricted:latest", "none"} {
		_, err := ParseLevel(s)
		if err == nil || !strings.Contains(err.Error(), "want privileged, baseline or restricted") ||
			!strings.Contains(err.Error(), `"`+s+`"`) {
			t.Errorf("ParseLevel(%q): %v, want an error naming the value and the three levels", s, err)
		}
	}
}

// TestPodSecurity: each check of the Pod Security Standards at baseline and
// at restricted, applied to a pod that otherwise passes restricted, with the
// API server's message ("" is admitted).
func TestPodSecurity(t *testing.T) {
	tests := []struct {
		name                 string
		mutate               func(pod *corev1.Pod)
		baseline, restricted string
	}{
		{
			name:       "host network",
			mutate:     func(pod *corev1.Pod) { pod.Spec.HostNetwork = true },
			baseline:   `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`,
			restricted: `violates PodSecurity "restricted:latest": host namespaces (hostNetwork=true)`,
		},
		{
			name:       "host PID and IPC",
			mutate:     func(pod *corev1.Pod) { pod.Spec.HostPID, pod.Spec.HostIPC = true, true },
			baseline:   `violates PodSecurity "baseline:latest": host namespaces (hostPID=true, hostIPC=true)`,
			restricted: `violates PodSecurity "restricted:latest": host namespaces (hostPID=true, hostIPC=true)`,
		},
		{
			name:       "privileged",
			mutate:     func(pod *corev1.Pod) { pod.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true) },
			baseline:   `violates PodSecurity "baseline:latest": privileged (container "c" must not set securityContext.privileged=true)`,
			restricted: `violates PodSecurity "restricted:latest": privileged (container "c" must not set securityContext.privileged=true)`,
		},
		{
			name: "capability added",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
			},
			baseline:   `violates PodSecurity "baseline:latest": non-default capabilities (container "c" must not include "NET_ADMIN" in securityContext.capabilities.add)`,
			restricted: `violates PodSecurity "restricted:latest": unrestricted capabilities (container "c" must not include "NET_ADMIN" in securityContext.capabilities.add)`,
		},
		{
			name: "NET_BIND_SERVICE added, which both allow",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"}
			},
		},
		{
			name: "a default capability added, which only baseline allows",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"CHOWN"}
			},
			restricted: `violates PodSecurity "restricted:latest": unrestricted capabilities (container "c" must not include "CHOWN" in securityContext.capabilities.add)`,
		},
		{
			name: "hostPath volume",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}}}}
			},
			baseline:   `violates PodSecurity "baseline:latest": hostPath volumes (volume "host")`,
			restricted: `violates PodSecurity "restricted:latest": restricted volume types (volume "host" uses restricted volume type "hostPath")`,
		},
		{
			name: "host port",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080}}
			},
			baseline:   `violates PodSecurity "baseline:latest": hostPort (container "c" uses hostPort 8080)`,
			restricted: `violates PodSecurity "restricted:latest": hostPort (container "c" uses hostPort 8080)`,
		},
		{
			name: "probe host",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
					HTTPGet: &corev1.HTTPGetAction{Host: "8.8.8.8", Port: intstr.FromInt32(80)}}}
			},
			baseline:   `violates PodSecurity "baseline:latest": probe or lifecycle host (container "c" uses probe or lifecycle host "8.8.8.8")`,
			restricted: `violates PodSecurity "restricted:latest": probe or lifecycle host (container "c" uses probe or lifecycle host "8.8.8.8")`,
		},
		{
			name: "AppArmor unconfined",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
			},
			baseline:   `violates PodSecurity "baseline:latest": forbidden AppArmor profile (container "c" must not set AppArmor profile type to "Unconfined")`,
			restricted: `violates PodSecurity "restricted:latest": forbidden AppArmor profile (container "c" must not set AppArmor profile type to "Unconfined")`,
		},
		{
			name: "AppArmor runtime default, which both allow",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].SecurityContext.AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}
			},
		},
		{
			name: "SELinux type",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
			},
			baseline:   `violates PodSecurity "baseline:latest": seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type "spc_t")`,
			restricted: `violates PodSecurity "restricted:latest": seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type "spc_t")`,
		},
		{
			name: "SELinux container_t, which both allow",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "container_t", Level: "s0:c123,c456"}
			},
		},
		{
			name: "procMount unmasked",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.UnmaskedProcMount)
			},
			baseline:   `violates PodSecurity "baseline:latest": procMount (container "c" must not set securityContext.procMount to "Unmasked")`,
			restricted: `violates PodSecurity "restricted:latest": procMount (container "c" must not set securityContext.procMount to "Unmasked")`,
		},
		{
			name: "procMount unmasked in a user namespace, which only baseline allows",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.HostUsers = ptr.To(false)
				pod.Spec.Containers[0].SecurityContext.ProcMount = ptr.To(corev1.UnmaskedProcMount)
			},
			restricted: `violates PodSecurity "restricted:latest": procMount (container "c" must not set securityContext.procMount to "Unmasked")`,
		},
		{
			name: "seccomp unconfined",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.SecurityContext.SeccompProfile.Type = corev1.SeccompProfileTypeUnconfined
			},
			baseline:   `violates PodSecurity "baseline:latest": seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")`,
			restricted: `violates PodSecurity "restricted:latest": seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")`,
		},
		{
			name: "unsafe sysctl",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}
			},
			baseline:   `violates PodSecurity "baseline:latest": forbidden sysctls (kernel.msgmax)`,
			restricted: `violates PodSecurity "restricted:latest": forbidden sysctls (kernel.msgmax)`,
		},
		{
			name: "safe sysctl, which both allow",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}
			},
		},
		{
			name: "nfs volume, which only baseline allows",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Volumes = []corev1.Volume{{Name: "share", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}}}
			},
			restricted: `violates PodSecurity "restricted:latest": restricted volume types (volume "share" uses restricted volume type "nfs")`,
		},
		{
			name: "emptyDir, configMap and secret volumes, which both allow",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.Volumes = []corev1.Volume{
					{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
					{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
				}
			},
		},
		{
			name:       "privilege escalation allowed",
			mutate:     func(pod *corev1.Pod) { pod.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = nil },
			restricted: `violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false)`,
		},
		{
			name:       "runAsNonRoot unset",
			mutate:     func(pod *corev1.Pod) { pod.Spec.SecurityContext.RunAsNonRoot = nil },
			restricted: `violates PodSecurity "restricted:latest": runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)`,
		},
		{
			name:       "runAsUser 0",
			mutate:     func(pod *corev1.Pod) { pod.Spec.SecurityContext.RunAsUser = ptr.To(int64(0)) },
			restricted: `violates PodSecurity "restricted:latest": runAsUser=0 (pod must not set runAsUser=0)`,
		},
		{
			name: "runAsUser 0 in a user namespace, which both allow",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.HostUsers = ptr.To(false)
				pod.Spec.SecurityContext.RunAsNonRoot = nil
				pod.Spec.SecurityContext.RunAsUser = ptr.To(int64(0))
			},
		},
		{
			name:       "seccomp profile unset",
			mutate:     func(pod *corev1.Pod) { pod.Spec.SecurityContext.SeccompProfile = nil },
			restricted: `violates PodSecurity "restricted:latest": seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`,
		},
		{
			name:       "capabilities not dropped",
			mutate:     func(pod *corev1.Pod) { pod.Spec.Containers[0].SecurityContext.Capabilities = nil },
			restricted: `violates PodSecurity "restricted:latest": unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"])`,
		},
		{
			name: "every violation at once, in the API server's order",
			mutate: func(pod *corev1.Pod) {
				pod.Spec.HostPID = true
				pod.Spec.SecurityContext = nil
				pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			},
			baseline: `violates PodSecurity "baseline:latest": host namespaces (hostPID=true), privileged (container "c" must not set securityContext.privileged=true)`,
			restricted: `violates PodSecurity "restricted:latest": host namespaces (hostPID=true), privileged (container "c" must not set securityContext.privileged=true), ` +
				`allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), ` +
				`unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), ` +
				`runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), ` +
				`seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`,
		},
	}
	for _, tt := range tests {
		for _, level := range []struct {
			level Level
			want  string
		}{{LevelPrivileged, ""}, {LevelBaseline, tt.baseline}, {LevelRestricted, tt.restricted}} {
			t.Run(tt.name+"/"+string(level.level), func(t *testing.T) {
				pod := testPod("web")
				tt.mutate(pod)
				node := testNode()
				node.PodSecurity = level.level
				got := checkPodSecurity(node, pod, nil)
				want := admitted
				if level.want != "" {
					want = Verdict{Reason: ReasonPodSecurity, Message: level.want}
				}
				if got != want {
					t.Errorf("got  %+v\nwant %+v", got, want)
				}
			})
		}
	}
}

// TestPodSecurityDefaultsToBaseline: a node whose level is unset checks
// baseline, the flag's default, rather than nothing.
func TestPodSecurityDefaultsToBaseline(t *testing.T) {
	pod := testPod("web")
	pod.Spec.HostNetwork = true
	node := testNode()
	node.PodSecurity = ""
	got := Admit(node, pod, NewHeld())
	want := `violates PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`
	if got.Reason != ReasonPodSecurity || got.Message != want {
		t.Errorf("got %+v, want %s", got, want)
	}
}
