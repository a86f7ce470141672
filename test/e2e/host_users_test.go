package e2e_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
)

// podUID is the uid the pods of these tests run as, and the local user
// who tries to reach them.
const podUID = 1001

// sameUIDPod runs as podUID with a secret in its environment and its root's
// /tmp, and an emptyDir at /data.
func sameUIDPod(uid string, rev int64) string {
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":%d,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"},
	    "spec":{"terminationGracePeriodSeconds":1,"securityContext":{"runAsUser":%d,"runAsGroup":%d},
	      "volumes":[{"name":"data","emptyDir":{}}],
	      "containers":[{"name":"app","image":"busybox:1.36","imagePullPolicy":"IfNotPresent",
	        "env":[{"name":"TOKEN","value":"env-s3cret"}],"volumeMounts":[{"name":"data","mountPath":"/data"}],
	        "command":["/bin/sh","-c","echo root-s3cret > /tmp/secret; chmod 600 /tmp/secret; exec sleep 3600"]}]}}}`,
		rev, strings.ToLower(uid), uid, podUID, podUID)
}

// reach is what a local process of uid podUID got of the pod's container
// pid: its root's /tmp/secret, its environment, a write into its emptyDir
// through its root; each the output, or the error.
type reach struct{ root, environ, write string }

func reachAsPodUID(t *testing.T, pid int) reach {
	t.Helper()
	run := func(script string) string {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: podUID, Gid: podUID, NoSetGroups: true}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Sprintf("refused: %v: %s", err, strings.TrimSpace(string(out)))
		}
		return strings.TrimSpace(string(out))
	}
	root := fmt.Sprintf("/proc/%d/root", pid)
	return reach{
		root:    run("cat " + root + "/tmp/secret"),
		environ: run(fmt.Sprintf("tr '\\0' '\\n' < /proc/%d/environ | grep TOKEN=", pid)),
		write:   run("echo intruder > " + root + "/data/intruder && echo written"),
	}
}

// runningPID waits for the pod to run and returns its container's host pid
// once it wrote its secret.
func runningPID(t *testing.T, n *node, cri *runtime.Client, uid string) int {
	t.Helper()
	st := n.waitStatus(uid, 60*time.Second, func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseRunning && st.Containers[0].State == schemas.ContainerRunning
	})
	resp, err := cri.ContainerStatus(t.Context(), st.Containers[0].ContainerID, true)
	if err != nil {
		t.Fatal(err)
	}
	pid := jetlettest.ContainerPID(t, resp)
	waitFile(t, fmt.Sprintf("/proc/%d/root/tmp/secret", pid))
	return pid
}

// A local user whose uid is a pod's runAsUser, through `jetlet run` as
// root. With the host's users (kubelet's default, and --default-host-users'),
// that user reads the pod's root and environment and writes into its
// emptyDir through /proc/<pid>/root, past the data dir's 0700: the risk
// docs/security.md states. Restarted with --default-host-users=false, the
// node keeps that running pod as it is (not restarted: its sandbox keeps
// the host's users), and a new pod that leaves hostUsers unset runs in a
// user namespace of its own, where the same user reaches none of the three.
func TestDefaultHostUsersFalseKeepsALocalUserWithThePodsUIDOut(t *testing.T) {
	requireRoot(t)
	n := startNode(t, shortDir(t), "")
	cri := criClient(t, n)
	n.publish("shared", sameUIDPod("shared", 1))
	pid := runningPID(t, n, cri, "shared")
	got := reachAsPodUID(t, pid)
	t.Logf("with the host's users: %+v", got)
	if got != (reach{root: "root-s3cret", environ: "TOKEN=env-s3cret", write: "written"}) {
		t.Errorf("a local user of the pod's uid, with the host's users: %+v; want the pod's root, environment and emptyDir reached", got)
	}
	intruder := filepath.Join(n.dataDir, "pods", "shared", "volumes", "kubernetes.io~empty-dir", "data", "intruder")
	if _, err := os.Stat(intruder); err != nil {
		t.Errorf("the write through /proc/<pid>/root is not in the emptyDir: %v", err)
	}
	before := n.waitStatus("shared", time.Second, func(*schemas.PodStatus) bool { return true })

	url := n.proc.NATSURL()
	n.proc.Signal(syscall.SIGTERM)
	if code := n.proc.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	n.extra = append(n.extra, "--nats-listen", strings.TrimPrefix(url, "nats://"), "--default-host-users=false")
	n.start()
	n.proc.WaitLog("--default-host-users=false: pods that leave hostUsers unset get a user namespace of their own", 10*time.Second)
	// The running pod is not restarted for the node's new default.
	n.publish("shared", sameUIDPod("shared", 2))
	if r := n.results("shared", 2)[1]; r.Outcome != schemas.OutcomeSynced || len(r.Actions) != 0 {
		t.Errorf("the running pod after the restart: %s %+v, want Synced without actions", r.Outcome, r.Actions)
	}
	after := n.waitStatus("shared", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Revision == 2 })
	if after.Containers[0].ContainerID != before.Containers[0].ContainerID || after.Containers[0].RestartCount != 0 {
		t.Errorf("the running pod was restarted: container %s (restarts %d), was %s", after.Containers[0].ContainerID, after.Containers[0].RestartCount, before.Containers[0].ContainerID)
	}

	n.publish("own", sameUIDPod("own", 1))
	pid = runningPID(t, n, criClient(t, n), "own")
	uidMap, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", pid))
	var inside, host uint64
	if _, scanErr := fmt.Sscan(string(uidMap), &inside, &host); err != nil || scanErr != nil || inside != 0 || host < 65536 {
		t.Fatalf("the new pod's uid_map %q (%v): want its own user namespace", uidMap, err)
	}
	got = reachAsPodUID(t, pid)
	t.Logf("in its own user namespace: %+v", got)
	for what, out := range map[string]string{"root": got.root, "environ": got.environ, "write": got.write} {
		if !strings.HasPrefix(out, "refused: ") || !strings.Contains(out, "Permission denied") {
			t.Errorf("%s of a pod in its own user namespace, as a local user of its uid: %q, want permission denied", what, out)
		}
	}
}
