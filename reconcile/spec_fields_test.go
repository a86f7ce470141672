package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime/crilabels"
	"github.com/jetlet/jetlet/test/fakecri"
	"github.com/jetlet/jetlet/test/leftovers"
)

func ptr[T any](v T) *T { return &v }

// Each spec field reaches the CRI config as kubelet puts it there. The
// honoured-or-rejected audit (schemas/audit_test.go) names this test for
// these fields.
func TestContainerConfigHonoursSpecFields(t *testing.T) {
	hostDir := t.TempDir()
	base := func() *corev1.Pod {
		return testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}})
	}
	tests := []struct {
		name  string
		edit  func(p *corev1.Pod, c *corev1.Container)
		check func(t *testing.T, cfg *runtimeapi.ContainerConfig)
	}{
		{"workingDir stdin stdinOnce tty", func(_ *corev1.Pod, c *corev1.Container) {
			c.WorkingDir, c.Stdin, c.StdinOnce, c.TTY = "/w", true, true, true
		}, func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
			if cfg.WorkingDir != "/w" || !cfg.Stdin || !cfg.StdinOnce || !cfg.Tty {
				t.Errorf("workingDir %q stdin %v stdinOnce %v tty %v", cfg.WorkingDir, cfg.Stdin, cfg.StdinOnce, cfg.Tty)
			}
		}},
		{"seccomp: the container's profile over the pod's", func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
			c.SecurityContext = &corev1.SecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr("audit.json")}}
		}, func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
			s := cfg.Linux.SecurityContext.Seccomp
			if s.GetProfileType() != runtimeapi.SecurityProfile_Localhost || !strings.HasSuffix(s.GetLocalhostRef(), "/seccomp/audit.json") {
				t.Errorf("seccomp %v", s)
			}
		}},
		{"seccomp: the pod's", func(p *corev1.Pod, _ *corev1.Container) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		}, func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
			if s := cfg.Linux.SecurityContext.Seccomp; s == nil || s.ProfileType != runtimeapi.SecurityProfile_RuntimeDefault {
				t.Errorf("seccomp %v", s)
			}
		}},
		{"appArmor", func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}}
			c.SecurityContext = &corev1.SecurityContext{AppArmorProfile: &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr("k8s-deny-write")}}
		}, func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
			if a := cfg.Linux.SecurityContext.Apparmor; a.GetProfileType() != runtimeapi.SecurityProfile_Localhost || a.GetLocalhostRef() != "k8s-deny-write" {
				t.Errorf("apparmor %v", a)
			}
		}},
		{"seLinuxOptions: the container's whole", func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{SELinuxOptions: &corev1.SELinuxOptions{User: "pod_u", Level: "s0:c1"}}
			c.SecurityContext = &corev1.SecurityContext{SELinuxOptions: &corev1.SELinuxOptions{Type: "spc_t"}}
		}, func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
			if o := cfg.Linux.SecurityContext.SelinuxOptions; o.GetType() != "spc_t" || o.GetUser() != "" || o.GetLevel() != "" {
				t.Errorf("selinux %v", o)
			}
		}},
		{"runAsUser runAsGroup supplementalGroups fsGroup supplementalGroupsPolicy", func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsGroup: ptr(int64(1000)),
				SupplementalGroups: []int64{5}, FSGroup: ptr(int64(2000)), SupplementalGroupsPolicy: ptr(corev1.SupplementalGroupsPolicyStrict)}
			c.SecurityContext = &corev1.SecurityContext{RunAsUser: ptr(int64(1001))}
		}, func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
			sc := cfg.Linux.SecurityContext
			if sc.RunAsUser.GetValue() != 1001 || sc.RunAsGroup.GetValue() != 1000 || !slices.Equal(sc.SupplementalGroups, []int64{5, 2000}) ||
				sc.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Strict {
				t.Errorf("security context %v", sc)
			}
		}},
		{"capabilities readOnlyRootFilesystem allowPrivilegeEscalation", func(_ *corev1.Pod, c *corev1.Container) {
			c.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr(true), AllowPrivilegeEscalation: ptr(false),
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}, Drop: []corev1.Capability{"ALL"}}}
		}, func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
			sc := cfg.Linux.SecurityContext
			if !sc.ReadonlyRootfs || !sc.NoNewPrivs || !slices.Equal(sc.Capabilities.AddCapabilities, []string{"NET_ADMIN"}) || !slices.Equal(sc.Capabilities.DropCapabilities, []string{"ALL"}) {
				t.Errorf("security context %v", sc)
			}
		}},
		{"hugepages limits by page size", func(_ *corev1.Pod, c *corev1.Container) {
			c.Resources.Limits = corev1.ResourceList{"hugepages-1Gi": resource.MustParse("2Gi"), "hugepages-2Mi": resource.MustParse("8Mi")}
		}, func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
			h := cfg.Linux.Resources.HugepageLimits
			if len(h) != 2 || h[0].PageSize != "2MB" || h[0].Limit != 8<<20 || h[1].PageSize != "1GB" || h[1].Limit != 2<<30 {
				t.Errorf("hugepage limits %v", h)
			}
		}},
		{"volume mounts: readOnly recursiveReadOnly mountPropagation subPathExpr", func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
			c.Env = []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
			c.VolumeMounts = []corev1.VolumeMount{
				{Name: "d", MountPath: "/ro", ReadOnly: true, RecursiveReadOnly: ptr(corev1.RecursiveReadOnlyEnabled)},
				{Name: "d", MountPath: "/logs", SubPathExpr: "logs/$(POD)", MountPropagation: ptr(corev1.MountPropagationHostToContainer)},
			}
		}, func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
			ro, logs := cfg.Mounts[0], cfg.Mounts[1]
			if !ro.Readonly || !ro.RecursiveReadOnly {
				t.Errorf("read-only mount %v", ro)
			}
			if !strings.HasSuffix(logs.HostPath, "/volume-subpaths/d/app/1") || logs.Propagation != runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER {
				t.Errorf("subPathExpr mount %v", logs)
			}
			if !sameFile(t, logs.HostPath, filepath.Join(filepath.Dir(cfg.Mounts[0].HostPath), "d", "logs", "p")) {
				t.Errorf("subPathExpr: %s is not the volume's logs/p", logs.HostPath)
			}
		}},
		{"hostPath volumes: DirectoryOrCreate made, subPath inside", func(p *corev1.Pod, c *corev1.Container) {
			p.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
				Path: hostDir + "/made", Type: ptr(corev1.HostPathDirectoryOrCreate)}}}}
			c.VolumeMounts = []corev1.VolumeMount{{Name: "h", MountPath: "/h"}, {Name: "h", MountPath: "/sub", SubPath: "x"}}
		}, func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
			if cfg.Mounts[0].HostPath != hostDir+"/made" || !sameFile(t, cfg.Mounts[1].HostPath, hostDir+"/made/x") {
				t.Errorf("mounts %v", cfg.Mounts)
			}
			if fi, err := os.Stat(hostDir + "/made"); err != nil || !fi.IsDir() {
				t.Errorf("DirectoryOrCreate: %v", err)
			}
		}},
		{"downward API fieldRefs", func(p *corev1.Pod, c *corev1.Container) {
			p.Labels, p.Annotations = map[string]string{"app": "web"}, map[string]string{"team": "x"}
			p.Spec.ServiceAccountName = "builder"
			for _, f := range []string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels['app']",
				"metadata.annotations['team']", "spec.nodeName", "spec.serviceAccountName", "status.podIP", "status.podIPs", "status.hostIP"} {
				c.Env = append(c.Env, corev1.EnvVar{Name: f, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: f}}})
			}
		}, func(t *testing.T, cfg *runtimeapi.ContainerConfig) {
			var got []string
			for _, e := range cfg.Envs {
				got = append(got, string(e.Value))
			}
			if want := []string{"p", "ns", "uid1", "web", "x", "n1", "builder", "10.0.0.1", "10.0.0.1,fd00::1", "192.0.2.1"}; !slices.Equal(got, want) {
				t.Errorf("env values %q, want %q", got, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			m, err := New(fakecri.New(), &eventLog{}, Config{NodeName: "n1", NodeIP: "192.0.2.1", DataDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { leftovers.Unmount(t, dir) })
			pod := base()
			tt.edit(pod, &pod.Spec.Containers[0])
			cfg, err := m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "img:1",
				podNetwork{podIP: "10.0.0.1", podIPs: []string{"10.0.0.1", "fd00::1"}}, false)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg)
		})
	}
}

// The sandbox: hostname (hostnameOverride over hostname over the pod's
// name), namespaces, sysctls, the pod's security profiles and groups (the
// DNS config: dns_test.go).
func TestSandboxConfigHonoursSpecFields(t *testing.T) {
	m, _ := newTestManager(t, fakecri.New())
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Ports: []corev1.ContainerPort{{ContainerPort: 80, HostPort: 8080, HostIP: "127.0.0.1", Protocol: corev1.ProtocolUDP}}})
	pod.Spec.Hostname = "h"
	pod.Spec.HostnameOverride = ptr("override")
	pod.Spec.HostIPC = true
	pod.Spec.ShareProcessNamespace = ptr(true)
	pod.Spec.DNSPolicy = corev1.DNSClusterFirst
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{
		Sysctls: []corev1.Sysctl{{Name: "net.core.somaxconn", Value: "1024"}}, FSGroup: ptr(int64(2000)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	pod.Labels, pod.Annotations = map[string]string{"app": "web"}, map[string]string{"team": "x"}
	cfg := sandboxConfig(t, m, pod)
	ns := cfg.Linux.SecurityContext.NamespaceOptions
	switch {
	case cfg.Metadata.Name != "p" || cfg.Metadata.Namespace != "ns" || cfg.Metadata.Uid != "uid1":
		t.Errorf("metadata %v", cfg.Metadata)
	case cfg.Labels["app"] != "web" || cfg.Labels[crilabels.LabelPodUID] != "uid1" || cfg.Annotations["team"] != "x":
		t.Errorf("labels %v annotations %v", cfg.Labels, cfg.Annotations)
	case cfg.Hostname != "override":
		t.Errorf("hostname %q, want the override", cfg.Hostname)
	case ns.Ipc != runtimeapi.NamespaceMode_NODE || ns.Pid != runtimeapi.NamespaceMode_POD || ns.Network != runtimeapi.NamespaceMode_POD ||
		ns.UsernsOptions.GetMode() != runtimeapi.NamespaceMode_NODE:
		t.Errorf("namespaces %v", ns)
	case cfg.Linux.Sysctls["net.core.somaxconn"] != "1024":
		t.Errorf("sysctls %v", cfg.Linux.Sysctls)
	case !slices.Equal(cfg.Linux.SecurityContext.SupplementalGroups, []int64{2000}):
		t.Errorf("supplemental groups %v, want the fsGroup", cfg.Linux.SecurityContext.SupplementalGroups)
	case cfg.Linux.SecurityContext.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault:
		t.Errorf("seccomp %v", cfg.Linux.SecurityContext.Seccomp)
	case len(cfg.PortMappings) != 1 || cfg.PortMappings[0].HostPort != 8080 || cfg.PortMappings[0].HostIp != "127.0.0.1" || cfg.PortMappings[0].Protocol != runtimeapi.Protocol_UDP:
		t.Errorf("port mappings %v", cfg.PortMappings)
	}
	pod.Spec.HostnameOverride = nil
	if cfg := sandboxConfig(t, m, pod); cfg.Hostname != "h" {
		t.Errorf("hostname %q, want spec.hostname", cfg.Hostname)
	}
	pod.Spec.HostNetwork, pod.Spec.HostPID = true, true
	cfg = sandboxConfig(t, m, pod)
	if ns := cfg.Linux.SecurityContext.NamespaceOptions; ns.Network != runtimeapi.NamespaceMode_NODE || ns.Pid != runtimeapi.NamespaceMode_NODE || cfg.Hostname != "" {
		t.Errorf("hostNetwork, hostPID: namespaces %v hostname %q", ns, cfg.Hostname)
	}
}

// sandboxConfig is the pod's sandbox config, attempt 0.
func sandboxConfig(t *testing.T, m *Kuberuntime, pod *corev1.Pod) *runtimeapi.PodSandboxConfig {
	t.Helper()
	cfg, _, err := m.generateSandboxConfig(pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// imageUser answers ImageStatus with the image's user.
type imageUser struct {
	*fakecri.Runtime
	uid      *runtimeapi.Int64Value
	username string
}

func (r imageUser) ImageStatus(context.Context, *runtimeapi.ImageSpec, bool) (*runtimeapi.ImageStatusResponse, error) {
	return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: "sha256:i", Uid: r.uid, Username: r.username}}, nil
}

// runAsNonRoot refuses root by the effective runAsUser, else by the image's
// user, as kubelet's verifyRunAsNonRoot.
func TestRunAsNonRoot(t *testing.T) {
	tests := []struct {
		name     string
		podUser  *int64
		user     *int64
		imageUID *runtimeapi.Int64Value
		username string
		wantErr  string
	}{
		{"runAsUser 0", nil, ptr(int64(0)), nil, "", "runAsUser 0"},
		{"the container's user over the pod's root", ptr(int64(0)), ptr(int64(1000)), &runtimeapi.Int64Value{Value: 0}, "", ""},
		{"image user root", nil, nil, &runtimeapi.Int64Value{Value: 0}, "", "will run as root"},
		{"image user 1000", nil, nil, &runtimeapi.Int64Value{Value: 1000}, "", ""},
		{"image user by name", nil, nil, nil, "nginx", "non-numeric user"},
		{"image without user", nil, nil, nil, "", ""},
	}
	// The pod's runAsNonRoot applies to its containers.
	podLevel := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}})
	podLevel.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(0))}
	pm, _ := newTestManager(t, fakecri.New())
	if err := pm.verifyRunAsNonRoot(context.Background(), podLevel, &podLevel.Spec.Containers[0], ""); err == nil || !strings.Contains(err.Error(), "runAsUser 0") {
		t.Errorf("the pod's runAsNonRoot with the pod's runAsUser 0: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newTestManager(t, imageUser{fakecri.New(), tt.imageUID, tt.username})
			pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr(true), RunAsUser: tt.user}})
			pod.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: tt.podUser}
			_, err := m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "sha256:i", podNetwork{}, false)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
		})
	}
	// Through a sync, the refusal is CreateContainerConfigError.
	m, _ := newTestManager(t, imageUser{fakecri.New(), &runtimeapi.Int64Value{Value: 0}, ""})
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
		SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr(true)}})
	if got := startResult(syncOnce(t, m, pod)).Error; got != "CreateContainerConfigError" {
		t.Errorf("sync: %q, want CreateContainerConfigError", got)
	}
}

// An emptyDir's mode, and a pod's fsGroup: the group owns the directory,
// which is group-writable and setgid, so that what the containers write in
// it belongs to the group.
func TestEmptyDirModeAndFSGroup(t *testing.T) {
	m, _ := newTestManager(t, fakecri.New())
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"},
		VolumeMounts: []corev1.VolumeMount{{Name: "private", MountPath: "/p"}, {Name: "shared", MountPath: "/s"}}})
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "private", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Mode: ptr(int32(0o700))}}},
		{Name: "shared", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	if _, err := m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "img:1", podNetwork{}, false); err != nil {
		t.Fatal(err)
	}
	mode := func(vol string) os.FileMode {
		fi, err := os.Stat(m.emptyDirPath("uid1", vol))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode()
	}
	if got := mode("private"); got.Perm() != 0o700 || got&os.ModeSetgid != 0 {
		t.Errorf("mode 0700: %v", got)
	}
	if got := mode("shared"); got.Perm() != 0o777 {
		t.Errorf("default mode: %v, want 0777", got)
	}
	if os.Geteuid() != 0 {
		t.Log("fsGroup: not root, cannot give the volume to another group; skipped")
		return
	}
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr(int64(2000)), FSGroupChangePolicy: ptr(corev1.FSGroupChangeOnRootMismatch)}
	if _, err := m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "img:1", podNetwork{}, false); err != nil {
		t.Fatal(err)
	}
	if got := mode("private"); got.Perm() != 0o770 || got&os.ModeSetgid == 0 {
		t.Errorf("mode 0700 with an fsGroup: %v, want group rwx and setgid", got)
	}
	fi, err := os.Stat(m.emptyDirPath("uid1", "shared"))
	if err != nil || fi.Sys().(*syscall.Stat_t).Gid != 2000 {
		t.Errorf("the volume's group: %v (%v), want the fsGroup 2000", fi, err)
	}
}

// A pod's deletionGracePeriodSeconds is the grace period of its kills, over
// its terminationGracePeriodSeconds, as kubelet's killContainer.
func TestDeletionGracePeriodSecondsWinsForKills(t *testing.T) {
	pod := testPod(corev1.Container{Name: "app", Image: "img:1"})
	pod.Spec.TerminationGracePeriodSeconds = ptr(int64(30))
	if g := gracePeriod(pod, &kubecontainer.ContainerStatus{}, &pod.Spec.Containers[0], killing{}); g != 30 {
		t.Errorf("without a deletion grace period: %d, want 30", g)
	}
	pod.DeletionGracePeriodSeconds = ptr(int64(7))
	if g := gracePeriod(pod, &kubecontainer.ContainerStatus{}, &pod.Spec.Containers[0], killing{}); g != 7 {
		t.Errorf("with deletionGracePeriodSeconds 7: %d", g)
	}
}
