package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// The tests below run pods through `jetlet run` on the embedded runtime. A
// volume mounted at /shared is there when jetlet is root (containers are
// isolated, $JETLET_ROOTFS is unset); otherwise containers are host
// processes and it is $JETLET_ROOTFS/shared to them (docs/embedded-runtime.md,
// Mounts), hence the scripts' $JETLET_ROOTFS/shared.

// shellCmd is the JSON of a /bin/sh -c script command.
func shellCmd(script string) string {
	b, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	return string(b)
}

// podWithSpec is an apply intent whose pod spec is spec (JSON members).
func podWithSpec(uid, spec string) string {
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"},"spec":{%s}}}`, strings.ToLower(uid), uid, spec)
}

// sharedVolume is a hostPath volume "shared" of dir, and its mount.
func sharedVolume(dir string) (volume, mount string) {
	return fmt.Sprintf(`"volumes":[{"name":"shared","hostPath":{"path":%q,"type":"Directory"}}]`, dir),
		`"volumeMounts":[{"name":"shared","mountPath":"/shared"}]`
}

// readLines is the file's lines; none while it does not exist.
func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// activeDeadlineSeconds: 3 ends a sleeping pod: its container killed with
// reason DeadlineExceeded, the pod Failed with reason DeadlineExceeded. The
// container is PID 1 of its pid namespace, which ignores SIGTERM unless it
// traps it: it does, so the kill need not wait for the grace period.
func TestActiveDeadlineEndsASleepingPod(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	n.publish("late", podWithSpec("late", `"restartPolicy":"Always","activeDeadlineSeconds":3,"terminationGracePeriodSeconds":5,
	  "containers":[{"name":"app","image":"busybox:1.36","command":`+shellCmd("trap 'exit 0' TERM; sleep 300 & wait")+`}]`))
	n.waitStatus("late", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	// Running is seen after the first sync, where the 3 s began.
	st := n.waitStatus("late", 5*time.Second, func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseFailed && st.Reason == schemas.ReasonDeadlineExceeded
	})
	if c := st.Containers[0]; c.State != schemas.ContainerExited {
		t.Errorf("container %+v, want exited", c)
	}
	n.waitEvent("late", schemas.EventContainerKilled, 10*time.Second, func(ev schemas.LifecycleEvent) bool {
		return ev.Reason == schemas.ReasonDeadlineExceeded
	})
}

// A sidecar starts before the app container, keeps running while the app
// container runs, and is stopped after it: on the pod's delete its SIGTERM
// handler runs after the app container's.
func TestSidecarRunsBesideTheAppAndStopsAfterIt(t *testing.T) {
	n := startNode(t, shortDir(t), "", mountsTheHost...)
	dir := t.TempDir()
	vol, mount := sharedVolume(dir)
	// Each writes its name to order when SIGTERM comes; the app container
	// takes a moment, so a sidecar stopped at the same time would come first.
	sidecar := `trap 'echo side >> $JETLET_ROOTFS/shared/order; exit 0' TERM; echo side >> $JETLET_ROOTFS/shared/started; sleep 300 & wait`
	app := `trap 'sleep 1; echo app >> $JETLET_ROOTFS/shared/order; exit 0' TERM; echo app >> $JETLET_ROOTFS/shared/started; sleep 300 & wait`
	n.publish("side", podWithSpec("side", `"restartPolicy":"Never","terminationGracePeriodSeconds":10,`+vol+`,
	  "initContainers":[{"name":"proxy","image":"busybox:1.36","restartPolicy":"Always","command":`+shellCmd(sidecar)+`,`+mount+`}],
	  "containers":[{"name":"app","image":"busybox:1.36","command":`+shellCmd(app)+`,`+mount+`}]`))
	st := n.waitStatus("side", 30*time.Second, func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseRunning && len(st.InitContainers) == 1 && st.InitContainers[0].State == schemas.ContainerRunning &&
			st.Containers[0].State == schemas.ContainerRunning
	})
	// Running is reported once a process runs, maybe before its first line.
	var started []string
	poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("both containers to write; started %v", started) }, func() bool {
		started = readLines(t, filepath.Join(dir, "started"))
		return len(started) >= 2
	})
	if got := strings.Join(started, ","); got != "side,app" {
		t.Errorf("started %q, want the sidecar first", got)
	}
	if st.InitContainers[0].RestartCount != 0 {
		t.Errorf("sidecar restarted %d times", st.InitContainers[0].RestartCount)
	}

	n.publish("side", deleteJSON("side", 2, 10))
	n.waitEvent("side", schemas.EventPodTerminated, 30*time.Second, nil)
	if got := strings.Join(readLines(t, filepath.Join(dir, "order")), ","); got != "app,side" {
		t.Errorf("stopped in the order %q, want app,side", got)
	}
}

// A pod whose app container finishes (restart policy Never) ends, its
// sidecar stopped: Succeeded.
func TestAPodWhoseAppFinishedEndsWithItsSidecar(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	n.publish("done", podWithSpec("done", `"restartPolicy":"Never","terminationGracePeriodSeconds":5,
	  "initContainers":[{"name":"proxy","image":"busybox:1.36","restartPolicy":"Always","command":`+shellCmd("exec sleep 300")+`}],
	  "containers":[{"name":"app","image":"busybox:1.36","command":`+shellCmd("sleep 1")+`}]`))
	st := n.waitStatus("done", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseSucceeded })
	if c := st.InitContainers[0]; c.State != schemas.ContainerExited {
		t.Errorf("sidecar %+v, want exited", c)
	}
	if c := st.Containers[0]; c.State != schemas.ContainerExited || c.ExitCode != 0 {
		t.Errorf("app %+v, want exited 0", c)
	}
}

// The file at terminationMessagePath is the container's message; once it
// restarted, its lastState keeps it.
func TestTerminationMessageAndLastState(t *testing.T) {
	n := startNode(t, shortDir(t), "", mountsTheHost...)
	// The first instance writes its message and fails; the next one runs.
	dir := t.TempDir()
	vol, mount := sharedVolume(dir)
	script := `if [ ! -e $JETLET_ROOTFS/shared/ran ]; then touch $JETLET_ROOTFS/shared/ran; echo "out of cheese" > $JETLET_ROOTFS/dev/termination-log; exit 3; fi; exec sleep 300`
	n.publish("msg", podWithSpec("msg", `"restartPolicy":"Always","terminationGracePeriodSeconds":5,`+vol+`,
	  "containers":[{"name":"app","image":"busybox:1.36","command":`+shellCmd(script)+`,`+mount+`}]`))
	st := n.waitStatus("msg", 30*time.Second, func(st *schemas.PodStatus) bool {
		c := st.Containers[0]
		return c.State == schemas.ContainerRunning && c.RestartCount == 1 && c.LastState != nil
	})
	ls := st.Containers[0].LastState
	if ls.ExitCode != 3 || ls.Reason != schemas.ReasonError || ls.Message != "out of cheese\n" || ls.FinishedAt == "" {
		t.Errorf("lastState %+v, want exit 3, Error, the message", ls)
	}
	died := n.waitEvent("msg", schemas.EventContainerDied, 10*time.Second, nil)
	if died.Message != "out of cheese\n" {
		t.Errorf("ContainerDied message %q", died.Message)
	}
}

// FallbackToLogsOnError: a container that fails without writing its file has
// the end of its log as its message.
func TestTerminationMessageFallsBackToTheLog(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	n.publish("logmsg", podWithSpec("logmsg", `"restartPolicy":"Never","terminationGracePeriodSeconds":5,
	  "containers":[{"name":"app","image":"busybox:1.36","terminationMessagePolicy":"FallbackToLogsOnError",
	    "command":`+shellCmd("echo starting >&2; echo 'cannot open config' >&2; exit 1")+`}]`))
	var st *schemas.PodStatus
	poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("a failed pod with a message; last %+v", st) }, func() bool {
		var ok bool
		st, ok = n.status("logmsg")
		return ok && st.Phase == schemas.PhaseFailed
	})
	if got := st.Containers[0].Message; got != "starting\ncannot open config\n" {
		t.Errorf("message %q, want the log's lines", got)
	}
}

// On delete with a grace period, the preStop hook runs before the
// container's SIGTERM handler: both write to a shared file, in that order.
func TestPreStopRunsBeforeTheSIGTERMHandler(t *testing.T) {
	n := startNode(t, shortDir(t), "", mountsTheHost...)
	dir := t.TempDir()
	vol, mount := sharedVolume(dir)
	app := `trap 'echo term >> $JETLET_ROOTFS/shared/order; exit 0' TERM; sleep 300 & wait`
	preStop := `{"preStop":{"exec":{"command":["/bin/sh","-c","echo prestop >> $JETLET_ROOTFS/shared/order"]}}}`
	n.publish("pre", podWithSpec("pre", `"restartPolicy":"Always","terminationGracePeriodSeconds":10,`+vol+`,
	  "containers":[{"name":"app","image":"busybox:1.36","command":`+shellCmd(app)+`,`+mount+`,"lifecycle":`+preStop+`}]`))
	n.waitStatus("pre", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	n.publish("pre", deleteJSON("pre", 2, 10))
	n.waitEvent("pre", schemas.EventPodTerminated, 30*time.Second, nil)
	if got := strings.Join(readLines(t, filepath.Join(dir, "order")), ","); got != "prestop,term" {
		t.Errorf("order %q, want prestop,term", got)
	}
}

// A failing postStart hook kills the container (FailedPostStartHook, then
// ContainerKilled with that reason); it is restarted with back-off.
func TestPostStartFailureKillsTheContainer(t *testing.T) {
	t.Parallel()
	n := startNode(t, shortDir(t), "")
	postStart := `{"postStart":{"exec":{"command":["/bin/sh","-c","echo no config >&2; exit 2"]}}}`
	n.publish("post", podWithSpec("post", `"restartPolicy":"Always","terminationGracePeriodSeconds":5,
	  "containers":[{"name":"app","image":"busybox:1.36","command":`+shellCmd("exec sleep 300")+`,"lifecycle":`+postStart+`}]`))
	failed := n.waitEvent("post", schemas.EventFailedPostStartHook, 30*time.Second, nil)
	if !strings.Contains(failed.Message, "no config") {
		t.Errorf("FailedPostStartHook message %q, want the hook's output", failed.Message)
	}
	killed := n.waitEvent("post", schemas.EventContainerKilled, 30*time.Second, nil)
	if killed.Reason != schemas.ReasonFailedPostStartHook || killed.ContainerID != failed.ContainerID {
		t.Errorf("ContainerKilled %+v, want reason FailedPostStartHook for %s", killed, failed.ContainerID)
	}
	n.waitStatus("post", 30*time.Second, func(st *schemas.PodStatus) bool {
		c := st.Containers[0]
		return c.RestartCount >= 1 && c.State != schemas.ContainerRunning
	})
}

// lifecycle.stopSignal reaches the embedded runtime: a delete stops the
// container with SIGUSR1, which its handler sees.
func TestStopSignalStopsTheContainer(t *testing.T) {
	n := startNode(t, shortDir(t), "", mountsTheHost...)
	dir := t.TempDir()
	vol, mount := sharedVolume(dir)
	app := `trap 'echo usr1 >> $JETLET_ROOTFS/shared/signals; exit 0' USR1; trap 'echo term >> $JETLET_ROOTFS/shared/signals; exit 0' TERM; sleep 300 & wait`
	n.publish("sig", podWithSpec("sig", `"restartPolicy":"Always","terminationGracePeriodSeconds":10,`+vol+`,
	  "containers":[{"name":"app","image":"busybox:1.36","command":`+shellCmd(app)+`,`+mount+`,"lifecycle":{"stopSignal":"SIGUSR1"}}]`))
	n.waitStatus("sig", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	n.publish("sig", deleteJSON("sig", 2, 10))
	n.waitEvent("sig", schemas.EventPodTerminated, 30*time.Second, nil)
	if got := strings.Join(readLines(t, filepath.Join(dir, "signals")), ","); got != "usr1" {
		t.Errorf("signals %q, want usr1", got)
	}
}
