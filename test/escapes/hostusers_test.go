package escapes_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/poll"
)

// TestProcRootFromTheHostUser: a process of the host running as the pod's
// runAsUser (1001) tries the pod through /proc/<pid>/root (a file in the
// container's root), /proc/<pid>/environ and a write into the pod's
// emptyDir through its root. On a node with --default-host-users=false, a
// pod that says nothing of hostUsers is in a user namespace of its own, its
// 1001 another id of the host, and each is refused. A pod that asks for the
// host's users (hostUsers: true) is tried too, and what it gives is only
// logged: sharing the host's uids is what that mode is (docs/security.md).
//
// On another runtime without user namespaces (containerd 1.6, runc before
// 1.2) the default cannot apply and the pod runs with the host's users, as
// docs/security.md says: the row skips there, when the pod's uid_map is
// the host's.
func TestProcRootFromTheHostUser(t *testing.T) {
	n := startNode(t, "--default-host-users=false")
	for _, c := range []struct {
		name, spec string
		assert     bool
	}{
		{"userns", ``, true},
		{"hostusers", `"hostUsers":true,`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			marker := "jetlet-escape-marker-" + randomHex(t, 8)
			inPod := "jetlet-pod-secret-" + randomHex(t, 8)
			uid := "uid1001-" + c.name
			n.apply(uid, c.spec+`"restartPolicy":"Never","securityContext":{"runAsUser":1001,"runAsGroup":1001},
			  "volumes":[{"name":"ed","emptyDir":{}}],
			  "containers":[`+container("app", "", fmt.Sprintf(`echo %s > /tmp/podfile; echo ready; exec sleep 3600`, inPod),
				fmt.Sprintf(`"env":[{"name":"MARKER","value":%q}],"volumeMounts":[{"name":"ed","mountPath":"/ed"}]`, marker))+`]`)
			var pid int
			poll.Until(t, 90*time.Second, poll.Msg("the pod's sleep among the host's processes"), func() bool {
				pid = findPid(marker)
				return pid > 0 && strings.Contains(n.logs(uid, "app"), "ready")
			})
			uidMap := readTrim(fmt.Sprintf("/proc/%d/uid_map", pid))
			if f := strings.Fields(uidMap); c.assert && n.rt.endpoint != "" && len(f) == 3 && f[1] == "0" {
				t.Skipf("the runtime gave the pod the host's users (uid_map %q): it has no user namespaces, and --default-host-users=false cannot apply", uidMap)
			}
			script := fmt.Sprintf(`echo "root file: $(cat /proc/%[1]d/root/tmp/podfile 2>&1)"
			  echo "environ: $(tr '\0' ' ' < /proc/%[1]d/environ 2>&1)"
			  echo x > /proc/%[1]d/root/ed/host-wrote 2>&1 && echo "emptyDir: written" || echo "emptyDir: refused"`, pid)
			cmd := exec.Command("/bin/busybox", "sh", "-c", script)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1001, Gid: 1001}}
			cmd.Dir = "/"
			out, err := cmd.CombinedOutput()
			t.Logf("as uid 1001 on the host, pid %d of the pod (%v):\n%s", pid, err, out)
			_, wrote := os.Stat(filepath.Join(n.emptyDir(uid, "ed"), "host-wrote"))
			if !c.assert {
				return
			}
			if bytes.Contains(out, []byte(inPod)) || bytes.Contains(out, []byte(marker)) || wrote == nil {
				t.Errorf("ESCAPE (into the pod): the host's uid 1001 read the pod's root or environment, or wrote its emptyDir (written: %v):\n%s", wrote == nil, out)
			}
		})
	}
}

// findPid is the host pid of a process whose environment holds marker (as
// MARKER=) and which runs sleep, or 0.
func findPid(marker string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if bytes.Contains(env, []byte("MARKER="+marker)) && bytes.HasPrefix(cmdline, []byte("sleep")) {
			return pid
		}
	}
	return 0
}
