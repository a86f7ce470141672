package embedded

import (
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A container of a default config, seen from an exec as kubelet makes one:
// containerd's masked and read-only paths (kubelet's defaults) hold, /sys
// is read-only, it cannot mount, it holds no descriptor of the runtime's,
// and the runtime's state dir (its shims' sockets) is not in its root.
// shim's escape_test.go attacks each of runc's published escapes.
func TestADefaultContainerHasNoWayOut(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	id := h.run(sb, sbCfg, "c", "sleep", "1000")
	state := filepath.Join(h.dir, "state")
	resp, err := h.rs.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Timeout: 30, Cmd: []string{"sh", "-c", `
		for f in /proc/kcore /proc/keys /proc/timer_list /proc/acpi/*; do
			[ -e $f ] && [ "$(cat $f | wc -c)" != 0 ] && echo $f is not masked
		done
		echo h 2>/dev/null > /proc/sysrq-trigger || echo sysrq-trigger read-only
		echo 1 2>/dev/null > /proc/sys/kernel/shm_rmid_forced || echo /proc/sys read-only
		touch /sys/x 2>/dev/null || echo /sys read-only
		mount -t tmpfs t /mnt 2>/dev/null || echo no mount
		ls /proc/$$/fd
		test -e ` + state + ` || echo no state dir`}})
	if err != nil {
		t.Fatal(err)
	}
	want := "sysrq-trigger read-only\n/proc/sys read-only\n/sys read-only\nno mount\n0\n1\n2\nno state dir\n"
	if got := string(resp.GetStdout()); got != want || resp.GetExitCode() != 0 {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s\nwant stdout:\n%s", resp.GetExitCode(), got, resp.GetStderr(), want)
	}
}

// Root of a pod in a user namespace, even with CAP_SYS_ADMIN there, cannot
// mount a cgroup v1 hierarchy and set its release_agent, which the host's
// kernel runs as the host's root (CVE-2022-0492): the cgroup namespace is
// the host's user namespace's, and the write needs CAP_SYS_ADMIN there.
func TestAPodInAUserNamespaceCannotSetACgroupReleaseAgent(t *testing.T) {
	h := newHarness(t)
	requireUserns(t, h)
	sb, sbCfg := h.usernsPod("agent", testUsernsBase)
	got := h.runImage(sb, sbCfg, "c", testImage, func(c *runtimeapi.ContainerConfig) {
		c.Command = []string{"sh", "-c", `for o in rdma memory cpu pids devices none,name=jetlet; do
			mount -t cgroup -o $o cgroup /mnt 2>/dev/null || continue
			echo "$o mounted"
			if [ -e /mnt/release_agent ]; then
				agent=$(cat /mnt/release_agent)
				echo "$agent" 2>/dev/null >/mnt/release_agent && echo "$o release_agent written"
			fi
			umount /mnt
		done; echo done`}
		inPodUserns(c, sbCfg)
		c.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{AddCapabilities: []string{"SYS_ADMIN"}}
	})
	if got != "done\n" {
		t.Errorf("the pod's root printed:\n%s", got)
	}
}
