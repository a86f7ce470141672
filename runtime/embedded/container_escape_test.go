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
