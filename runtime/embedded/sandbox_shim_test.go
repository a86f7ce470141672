package embedded

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podWith runs a sandbox with cfg's extras (hostname, DNS, sysctls, namespace
// options) and returns its id and config.
func (h *harness) podWith(name string, adjust func(*runtimeapi.PodSandboxConfig)) (string, *runtimeapi.PodSandboxConfig) {
	h.t.Helper()
	cfg := podConfig(name, nil)
	cfg.LogDirectory = filepath.Join(h.logs, name)
	adjust(cfg)
	resp, err := h.rs.RunPodSandbox(ctxT(h.t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		h.t.Fatalf("RunPodSandbox: %v", err)
	}
	return resp.GetPodSandboxId(), cfg
}

// output runs a container printing what script prints and returns it.
func (h *harness) output(sb string, sbCfg *runtimeapi.PodSandboxConfig, name, script string) string {
	h.t.Helper()
	return h.outputWith(sb, sbCfg, name, script, nil)
}

// outputWith is output with the container's config adjusted first.
func (h *harness) outputWith(sb string, sbCfg *runtimeapi.PodSandboxConfig, name, script string, adjust func(*runtimeapi.ContainerConfig)) string {
	h.t.Helper()
	cfg := containerConfig(name, nil, "sh", "-c", script+"; echo END")
	if adjust != nil {
		adjust(cfg)
	}
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)
	st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	lines := h.waitLog(st.GetLogPath(), "END")
	var out []string
	for _, l := range lines {
		if _, content, ok := strings.Cut(l, " stdout F "); ok && content != "END" {
			out = append(out, content)
		}
	}
	return strings.Join(out, "\n")
}

func requireIsolation(t *testing.T, h *harness) {
	t.Helper()
	if level, missing := h.rt.Isolation(); level != IsolationFull {
		t.Skipf("isolation %s: %v", level, missing)
	}
}

func TestPodHostnameDNSAndSysctls(t *testing.T) {
	h := newHarness(t)
	requireIsolation(t, h)
	hostHostname, _ := os.Hostname()
	hostShm, _ := os.ReadFile("/proc/sys/kernel/shm_rmid_forced")
	sb, sbCfg := h.podWith("p", func(c *runtimeapi.PodSandboxConfig) {
		c.Hostname = "podhost"
		c.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.0.0.10"}, Searches: []string{"ns.svc.cluster.local"}, Options: []string{"ndots:5"}}
		c.Linux = &runtimeapi.LinuxPodSandboxConfig{Sysctls: map[string]string{"kernel.shm_rmid_forced": "1"}}
	})
	got := h.output(sb, sbCfg, "c", "hostname; cat /etc/hostname; cat /etc/resolv.conf; cat /proc/sys/kernel/shm_rmid_forced")
	want := "podhost\npodhost\nnameserver 10.0.0.10\nsearch ns.svc.cluster.local\noptions ndots:5\n1"
	if got != want {
		t.Fatalf("the pod saw\n%s\nwant\n%s", got, want)
	}
	if now, _ := os.Hostname(); now != hostHostname {
		t.Fatalf("the host's name changed to %q", now)
	}
	if now, _ := os.ReadFile("/proc/sys/kernel/shm_rmid_forced"); string(now) != string(hostShm) {
		t.Fatalf("the host's kernel.shm_rmid_forced changed to %q", now)
	}
}

func TestSysctlsThePodDoesNotScopeAreRefused(t *testing.T) {
	h := newHarness(t)
	requireIsolation(t, h)
	for name, sysctl := range map[string]string{
		"host IPC":       "kernel.shm_rmid_forced",
		"not namespaced": "vm.swappiness",
		"host network":   "net.ipv4.ip_forward",
	} {
		t.Run(name, func(t *testing.T) {
			cfg := podConfig("p-"+strings.ReplaceAll(name, " ", "-"), nil)
			cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{
				Sysctls: map[string]string{sysctl: "1"},
				SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{
					Ipc: runtimeapi.NamespaceMode_NODE, Network: runtimeapi.NamespaceMode_NODE}},
			}
			_, err := h.rs.RunPodSandbox(ctxT(t), &runtimeapi.RunPodSandboxRequest{Config: cfg})
			if err == nil || !strings.Contains(err.Error(), sysctl) {
				t.Fatalf("RunPodSandbox with %s = %v, want an error naming it", sysctl, err)
			}
		})
	}
}

func TestContainersOfAPodShareShmButNotTmp(t *testing.T) {
	h := newHarness(t)
	requireIsolation(t, h)
	sb, sbCfg := h.pod("p", nil)
	marker := filepath.Join(h.shared, "first-ready")
	h.run(sb, sbCfg, "first", "sh", "-c", "echo mine > /tmp/mark; touch /dev/shm/pod-shm; touch "+marker+"; exec sleep 1000")
	eventually(t, "first container ready", func() bool { _, err := os.Stat(marker); return err == nil })
	got := h.output(sb, sbCfg, "second", "ls /dev/shm; test -e /tmp/mark && echo sees-tmp || echo own-tmp")
	lines := strings.Split(got, "\n")
	if len(lines) < 2 || lines[0] != "pod-shm" || lines[1] != "own-tmp" {
		t.Fatalf("second container saw %q: want the pod's /dev/shm and its own /tmp", got)
	}
	if _, err := os.Stat("/dev/shm/pod-shm"); err == nil {
		t.Fatal("the pod's shared memory reached the host's /dev/shm")
	}
}
