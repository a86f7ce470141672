package e2e_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/logindtest"
	"github.com/jetlet/jetlet/test/poll"
)

// shutdownPod is a pod whose preStop hook and SIGTERM handler write their
// names to the shared order file; priority "" leaves it unset.
func shutdownPod(uid, priority string, grace int, dir string) string {
	vol, mount := sharedVolume(dir)
	app := fmt.Sprintf(`trap 'echo %s-term >> $JETLET_ROOTFS/shared/order; exit 0' TERM; sleep 300 & wait`, uid)
	preStop := fmt.Sprintf(`{"preStop":{"exec":{"command":["/bin/sh","-c","echo %s-prestop >> $JETLET_ROOTFS/shared/order"]}}}`, uid)
	if priority != "" {
		priority = `"priority":` + priority + `,`
	}
	return podWithSpec(uid, fmt.Sprintf(`"restartPolicy":"Always",%s"terminationGracePeriodSeconds":%d,%s,
	  "containers":[{"name":"app","image":"busybox:1.36","command":%s,%s,"lifecycle":%s}]`, priority, grace, vol, shellCmd(app), mount, preStop))
}

// Graceful node shutdown through `jetlet run` and a logind on a private
// system bus (the host has no systemd; test/vm's guest runs the real one):
// jetlet holds a delay inhibitor lock; on PrepareForShutdown(true) the node
// says it is not ready, refuses new pods, stops the pod that is not critical
// (its preStop hook first) before the critical one, each with kubelet's
// grace, and has their statuses (Failed, Terminated, kubelet's message) and
// events stored before it releases the lock; a cancel takes the lock again.
func TestGracefulNodeShutdown(t *testing.T) {
	l := logindtest.Start(t, time.Minute)
	dir := t.TempDir()
	n := startNodeEnv(t, shortDir(t), "", []string{l.Env()}, append(mountsTheHost,
		"--shutdown-grace-period", "20s", "--shutdown-grace-period-critical-pods", "8s")...)
	poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("jetlet's lock; held by %q", l.Held()) }, func() bool {
		return slices.Equal(l.Held(), []string{"jetlet"})
	})
	if l.Delay() != time.Minute {
		t.Errorf("logind's delay changed to %s; a minute was enough", l.Delay())
	}
	n.publish("web", shutdownPod("web", "", 30, dir))
	n.publish("critical", shutdownPod("critical", "2000001000", 5, dir))
	for _, uid := range []string{"web", "critical"} {
		n.waitStatus(uid, 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	}

	l.PrepareForShutdown(t, true)
	rec := n.waitRecord(t, 30*time.Second, func(rec schemas.NodeRecord) bool {
		return rec.Conditions[0].Type == corev1.NodeReady && rec.Conditions[0].Status == corev1.ConditionFalse
	})
	if c := rec.Conditions[0]; c.Reason != "KubeletNotReady" || c.Message != "node is shutting down" {
		t.Errorf("Ready while shutting down: %+v, want False, KubeletNotReady, node is shutting down", c)
	}
	poll.Until(t, 60*time.Second, func() string { return fmt.Sprintf("the lock released; held by %q", l.Held()) }, func() bool {
		return len(l.Held()) == 0
	})
	// Stored before the lock was released (NATS's clock is this host's).
	released := l.Released()
	events, err := n.js.Stream(t.Context(), schemas.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{"web", "critical"} {
		if e, err := n.statusKV.Get(t.Context(), n.name+"."+uid); err != nil {
			t.Error(err)
		} else if e.Created().After(released) {
			t.Errorf("%s's status stored at %v, after the lock was released at %v", uid, e.Created(), released)
		}
		if last, err := events.GetLastMsgForSubject(t.Context(), "jetlet.event."+n.name+"."+uid+".>"); err != nil {
			t.Error(err)
		} else if last.Time.After(released) {
			t.Errorf("%s's last event (%s) stored at %v, after the lock was released at %v", uid, last.Subject, last.Time, released)
		}
		st, ok := n.status(uid)
		if !ok || st.Phase != schemas.PhaseFailed || st.Reason != "Terminated" ||
			st.Message != "Pod was terminated in response to imminent node shutdown." {
			t.Errorf("%s's status when the lock was released: %+v", uid, st)
		}
		killed := readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event."+n.name+"."+uid+"."+string(schemas.EventContainerKilled))
		if len(killed) != 1 || killed[0].Reason != "Terminated" {
			t.Errorf("%s's ContainerKilled events when the lock was released: %+v, want one with reason Terminated", uid, killed)
		}
	}
	if got := strings.Join(readLines(t, filepath.Join(dir, "order")), ","); got != "web-prestop,web-term,critical-prestop,critical-term" {
		t.Errorf("order %q, want web (not critical) first, each preStop hook before SIGTERM", got)
	}
	// Each pod's own grace, capped at its group's (20 s less 8 s; 8 s).
	stopped := map[any]any{}
	for _, line := range strings.Split(n.proc.Logs(), "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) == nil && entry["message"] == "stopping a pod for the node's shutdown" {
			stopped[entry["uid"]] = entry["grace_seconds"]
		}
	}
	if want := map[any]any{"web": 12.0, "critical": 5.0}; !maps.Equal(stopped, want) {
		t.Errorf("pods stopped with grace %v, want %v", stopped, want)
	}

	// Admission refuses while the node shuts down.
	n.publish("late", podJSON("late", 1, "Always", "sleep 300"))
	if r := n.results("late", 1)[0]; r.Outcome != schemas.OutcomeRejected {
		t.Errorf("a pod applied while the node shuts down: %s, want rejected", r.Outcome)
	}
	if st := n.waitStatus("late", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseFailed }); st.Reason != "NodeShutdown" ||
		st.Message != "Pod was rejected as the node is shutting down." {
		t.Errorf("late's status %+v, want NodeShutdown and kubelet's message", st)
	}

	// Cancelled: ready again, and the lock taken again.
	l.PrepareForShutdown(t, false)
	poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("the lock taken again; held by %q", l.Held()) }, func() bool {
		return slices.Equal(l.Held(), []string{"jetlet"})
	})
	n.waitRecord(t, 30*time.Second, func(rec schemas.NodeRecord) bool {
		return rec.Conditions[0].Type == corev1.NodeReady && rec.Conditions[0].Status == corev1.ConditionTrue
	})
}
