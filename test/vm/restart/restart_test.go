//go:build jetlet_vm

package restart

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/vm/vmguest"
)

const (
	node   = "guest"
	uid    = "sleeper"
	intent = `{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"sleeper","namespace":"default","uid":"sleeper"},
	    "spec":{"restartPolicy":"Always","terminationGracePeriodSeconds":2,
	      "containers":[{"name":"app","image":"busybox:1.36",
	        "command":["/bin/sh","-c","trap 'exit 0' TERM; while :; do sleep 1; done"]}]}}}`
)

// jetlet installed as docs/deploy.md says, on systemd 252 with cgroup v2,
// running a pod of the embedded runtime: `systemctl restart jetlet`, then a
// SIGKILL of jetlet that Restart=on-failure answers. Each time jetlet must
// come back ready and adopt the pod, its container the same one, not
// restarted.
func TestRestartUnderSystemd(t *testing.T) {
	vmguest.InstallUnits(t, vmguest.Units{
		NATS: true,
		JetletEnv: []string{
			"JETLET_NODE=" + node,
			"JETLET_NATS_URL=" + vmguest.NATSURL,
			"JETLET_HTTP_LISTEN=" + vmguest.HTTPListen,
		},
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("systemctl status jetlet:\n%s", vmguest.Combined("systemctl", "status", "--no-pager", "-l", "jetlet.service"))
			t.Logf("journalctl -u jetlet:\n%s", vmguest.Combined("journalctl", "-u", "jetlet.service", "--no-pager", "-o", "short-monotonic"))
			t.Logf("cgroups:\n%s", vmguest.Combined("systemd-cgls", "--no-pager", "-a"))
		}
	})
	vmguest.Systemctl(t, "start", "nats-server.service", "jetlet.service")
	// After the pod's removal (registered later, run first).
	t.Cleanup(func() { vmguest.Uninstall(t) })
	js := vmguest.Connect(t)
	poll.Until(t, 2*time.Minute, poll.Msg("jetlet's image import socket"), func() bool {
		_, err := os.Stat(filepath.Join(vmguest.JetletDataDir, "image-import.sock"))
		return err == nil
	})
	jetlettest.ImportTestImages(t, vmguest.JetletDataDir)
	if _, err := js.Publish(t.Context(), "jetlet.intent."+node+"."+uid, []byte(intent)); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(t.Context(), schemas.BucketStatus)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deletePod(t, js, kv) })
	first := running(t, kv)
	st, _ := jetlettest.PodStatus(t, kv, node, uid)
	scope := "jetlet-pod-" + st.Sandbox.ID + ".scope"
	inScope(t, scope, "started")
	procPID := containerPID(t, scope)
	pid := vmguest.MainPID(t, "jetlet.service")

	vmguest.Systemctl(t, "restart", "jetlet.service")
	pid = comeBack(t, kv, first, scope, procPID, pid, "systemctl restart")
	inScope(t, scope, "after systemctl restart")

	vmguest.Output(t, "kill", "-KILL", strconv.Itoa(pid))
	comeBack(t, kv, first, scope, procPID, pid, "SIGKILL and Restart=on-failure")
	inScope(t, scope, "after SIGKILL")
}

// inScope checks that the pod lives outside jetlet's unit, in its scope
// under jetlet.slice: the shim in the scope's leaf shim, its container in
// the pod's cgroup beside it.
func inScope(t *testing.T, scope, when string) {
	t.Helper()
	if got := strings.TrimSpace(vmguest.Output(t, "systemctl", "show", "-p", "ActiveState", "--value", scope)); got != "active" {
		t.Fatalf("%s: %s is %q, want active", when, scope, got)
	}
	procs := strings.Fields(vmguest.Output(t, "systemd-cgls", "--no-pager", "-u", scope))
	t.Logf("%s: %s: %v", when, scope, procs)
	for _, want := range []string{"─shim", "/usr/local/bin/jetlet-shim", "─pod" + uid, "sleep"} {
		if !slices.Contains(procs, want) && !slices.ContainsFunc(procs, func(f string) bool { return strings.HasSuffix(f, want) }) {
			t.Errorf("%s: %s lacks %q", when, scope, want)
		}
	}
}

// deletePod deletes the pod through the bus and waits for jetlet to say
// it is gone.
func deletePod(t *testing.T, js jetstream.JetStream, kv jetstream.KeyValue) {
	del := `{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","op":"delete","revision":2,"gracePeriodSeconds":2,
	  "pod":{"metadata":{"name":"sleeper","namespace":"default","uid":"sleeper"}}}`
	if _, err := js.Publish(context.Background(), "jetlet.intent."+node+"."+uid, []byte(del)); err != nil {
		t.Error(err)
		return
	}
	poll.Until(t, 2*time.Minute, poll.Msg(uid+" terminated"), func() bool {
		st, ok := jetlettest.PodStatus(t, kv, node, uid)
		return ok && st.Phase == schemas.PhaseTerminated
	})
}

// comeBack waits for a new jetlet (a main pid other than before), ready,
// and checks that the pod's container runs on: the same process in its
// cgroup, the same container in the pod's status, no restart.
func comeBack(t *testing.T, kv jetstream.KeyValue, want schemas.ContainerStatus, scope string, wantPID string, before int, after string) int {
	t.Helper()
	var pid int
	poll.Until(t, 2*time.Minute, func() string {
		return after + ": jetlet running again: " + vmguest.Combined("systemctl", "show", "-p", "ActiveState,SubState,MainPID,ExecMainStatus,NRestarts", "jetlet.service")
	}, func() bool {
		pid = vmguest.MainPID(t, "jetlet.service")
		return pid != 0 && pid != before
	})
	vmguest.WaitReady(t, 2*time.Minute)
	if got := containerPID(t, scope); got != wantPID {
		t.Fatalf("%s: the container's process is %s, was %s", after, got, wantPID)
	}
	st, _ := jetlettest.PodStatus(t, kv, node, uid)
	if got := st.Containers[0]; st.Phase != schemas.PhaseRunning || got.ContainerID != want.ContainerID || got.RestartCount != 0 || got.StartedAt != want.StartedAt {
		t.Fatalf("%s: pod %s, container %+v; want %s still running, not restarted", after, st.Phase, got, want.ContainerID)
	}
	t.Logf("%s: jetlet %d -> %d, container %s (process %s) adopted", after, before, pid, want.ContainerID, wantPID)
	return pid
}

// containerPID is the pod's container's shell, read from its cgroup in the
// pod's scope.
func containerPID(t *testing.T, scope string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("/sys/fs/cgroup/jetlet.slice", scope, "pod"+uid, "*", "cgroup.procs"))
	if err != nil || len(files) != 1 {
		t.Fatalf("the container's cgroup in %s: %v, %v", scope, files, err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	// The shell, not the sleep it runs each second.
	for _, pid := range strings.Fields(string(b)) {
		if comm, err := os.ReadFile("/proc/" + pid + "/comm"); err == nil && string(comm) == "sh\n" {
			return pid
		}
	}
	t.Fatalf("no sh among the container's processes %q", b)
	return ""
}

// running waits for the pod to run and returns its container's status.
func running(t *testing.T, kv jetstream.KeyValue) schemas.ContainerStatus {
	t.Helper()
	var st *schemas.PodStatus
	poll.Until(t, 3*time.Minute, poll.Msg(uid+" running"), func() bool {
		var ok bool
		st, ok = jetlettest.PodStatus(t, kv, node, uid)
		return ok && st.Phase == schemas.PhaseRunning && len(st.Containers) == 1 && st.Containers[0].ContainerID != ""
	})
	return st.Containers[0]
}
