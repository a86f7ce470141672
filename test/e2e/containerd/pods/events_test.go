package containerd_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// The messages jetlet logs once it knows whether the runtime streams
// container events (reconcile/pleg).
const (
	eventedPLEGOn = "evented PLEG on: relisting at each container event, and every relist period while the stream stays up"
	noEventStream = "the runtime has no container event stream; relisting every period"
)

// TestContainerExitSeenFromTheEventStream: on a runtime with container
// events (containerd 2), jetlet relists at kubelet's evented-PLEG period
// (300s, and it resyncs pods as rarely), yet a container's exit reaches
// ContainerDied at once: the runtime's event triggers the relist.
// containerd 1.6 has no event stream, and this test skips there.
func TestContainerExitSeenFromTheEventStream(t *testing.T) {
	s := newSuite(t)
	n := s.startNode("--relist-period", "300s", "--evented-relist-period", "300s", "--resync-period", "300s")
	uid := s.uid("exit")
	// SIGUSR1 makes the shell (PID 1) exit 7.
	seq := n.publish(uid, s.podJSON(uid, 1, "Never", "trap 'exit 7' USR1; echo waiting; sleep 3600 & wait"))
	if r := n.waitResult(uid, seq, 60*time.Second); r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	// The pod's own creation brings the first events, if the runtime has any.
	var evented bool
	poll.Until(t, 30*time.Second, poll.Msg("jetlet to log whether the runtime streams container events"), func() bool {
		logs := n.proc.Logs()
		evented = strings.Contains(logs, eventedPLEGOn)
		return evented || strings.Contains(logs, noEventStream)
	})
	if !evented {
		t.Skip("the runtime has no container event stream (GetContainerEvents is Unimplemented): jetlet relists every period")
	}
	st := n.waitStatus(uid, 60*time.Second, "Running", running)
	cid := st.Containers[0].ContainerID
	s.waitLog(cid, "waiting", 30*time.Second) // the trap is set

	// Behind jetlet's back: only the runtime's event can tell it.
	killed := time.Now()
	// The exec's own exit code is moot: PID 1 exiting may kill it first (137).
	if _, err := s.cri.ExecSync(context.Background(), cid, []string{"/bin/sh", "-c", "kill -USR1 1"}, 10*time.Second); err != nil {
		t.Fatalf("exec kill -USR1 1: %v", err)
	}
	// The deadline is far below the 300s relist and resync periods, and
	// below garbage collection's minute: nothing but the event relists.
	died := n.waitEvent(uid, schemas.EventContainerDied, 30*time.Second, func(ev schemas.LifecycleEvent) bool { return ev.ContainerID == cid })
	t.Logf("ContainerDied stored %s after the kill (relist period 300s)", time.Since(killed).Round(time.Millisecond))
	if died.ExitCode == nil || *died.ExitCode != 7 {
		b, _ := json.Marshal(died)
		t.Errorf("ContainerDied %s: want exit code 7", b)
	}
	n.waitStatus(uid, 30*time.Second, "Failed with exit code 7", func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseFailed && len(st.Containers) == 1 && st.Containers[0].ExitCode == 7
	})
}
