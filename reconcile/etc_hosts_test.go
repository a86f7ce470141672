package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/internal/etchosts"
)

// hostsMountOf is the container's /etc/hosts mount, and what its file holds.
func hostsMountOf(t *testing.T, m *Kuberuntime, pod *corev1.Pod, net podNetwork) (*runtimeapi.Mount, string) {
	t.Helper()
	cfg, err := m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "img:1", net, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, mnt := range cfg.Mounts {
		if filepath.Clean(mnt.ContainerPath) == "/etc/hosts" {
			b, err := os.ReadFile(mnt.HostPath)
			if err != nil {
				t.Fatal(err)
			}
			return mnt, string(b)
		}
	}
	return nil, ""
}

// The pod's /etc/hosts, as kubelet's makeHostsMount: a file in the pod's data
// dir with localhost's names, the pod's hostname (fully qualified with a
// subdomain) at each of its IPs and its hostAliases; on the node's network,
// the node's hosts file and the aliases; none when a volume takes
// /etc/hosts or the pod has no IP.
func TestEtcHostsMount(t *testing.T) {
	m, _ := dnsManager(t, Config{ClusterDomain: "example.test"})
	m.cfg.HostsFile = filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(m.cfg.HostsFile, []byte("127.0.0.1\tlocalhost\n192.0.2.1\tnode1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := testPod(corev1.Container{Name: "app", Image: "img:1"})
	pod.Spec.Hostname, pod.Spec.Subdomain = "web", "db"
	pod.Spec.HostAliases = []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"foo.local", "bar.local"}}, {IP: "fd00::9", Hostnames: []string{"v6.local"}}}
	net := podNetwork{podIPs: []string{"10.0.0.7", "fd00::7"}}

	mnt, got := hostsMountOf(t, m, pod, net)
	want := "# Kubernetes-managed hosts file.\n" + etchosts.Localhost +
		"10.0.0.7\tweb.db.ns.svc.example.test\tweb\n" +
		"fd00::7\tweb.db.ns.svc.example.test\tweb\n" +
		"\n# Entries added by HostAliases.\n" +
		"10.1.2.3\tfoo.local\tbar.local\n" +
		"fd00::9\tv6.local\n"
	switch {
	case mnt == nil:
		t.Fatal("no /etc/hosts mount")
	case mnt.HostPath != filepath.Join(m.podDataDir("uid1"), "etc-hosts") || mnt.Readonly:
		t.Errorf("mount %v, want <pod dir>/etc-hosts read-write", mnt)
	case got != want:
		t.Errorf("hosts file\n%s\nwant\n%s", got, want)
	}

	pod.Spec.Subdomain, pod.Spec.HostAliases = "", nil
	if _, got := hostsMountOf(t, m, pod, net); got != "# Kubernetes-managed hosts file.\n"+etchosts.Localhost+"10.0.0.7\tweb\nfd00::7\tweb\n" {
		t.Errorf("without a subdomain or aliases:\n%s", got)
	}

	pod.Spec.HostNetwork = true
	pod.Spec.HostAliases = []corev1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"foo.local"}}}
	if _, got := hostsMountOf(t, m, pod, podNetwork{}); got != "# Kubernetes-managed hosts file (host network).\n127.0.0.1\tlocalhost\n192.0.2.1\tnode1\n\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\n" {
		t.Errorf("on the node's network:\n%s", got)
	}

	pod.Spec.HostNetwork = false
	if mnt, _ := hostsMountOf(t, m, pod, podNetwork{}); mnt != nil {
		t.Errorf("a pod without an IP got %v", mnt)
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: m.cfg.HostsFile}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "h", MountPath: "/etc/hosts/"}}
	if mnt, _ := hostsMountOf(t, m, pod, net); mnt == nil || mnt.HostPath != m.cfg.HostsFile {
		t.Errorf("a volume at /etc/hosts: mount %v, want the volume's alone", mnt)
	}
}
