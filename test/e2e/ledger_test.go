package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/nats-io/nats.go/jetstream"
)

// factCounts counts the stored events of each container instance by type.
type factCounts map[string]map[schemas.EventType]int

// nodeEvents reads every event of node n1, fails the test for an id stored
// twice, and counts each instance's events.
func nodeEvents(t *testing.T, n *node) ([]schemas.LifecycleEvent, factCounts) {
	t.Helper()
	evs := readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event.n1.>")
	ids := map[string]bool{}
	counts := factCounts{}
	for _, ev := range evs {
		if ids[ev.ID] {
			t.Errorf("event %s (%s of %s) stored twice", ev.ID, ev.Type, ev.UID)
		}
		ids[ev.ID] = true
		if ev.ContainerID != "" {
			if counts[ev.ContainerID] == nil {
				counts[ev.ContainerID] = map[schemas.EventType]int{}
			}
			counts[ev.ContainerID][ev.Type]++
		}
	}
	return evs, counts
}

// settle waits until every event queued before now is stored or known
// stored, and returns the id of the container it started: a new pod's
// ContainerStarted is queued after them (its sync needs a relist that started
// after its intent) and events are published in order.
func settle(t *testing.T, n *node, uid string) string {
	t.Helper()
	n.publish(uid, podJSON(uid, 1, "Always", "exec sleep 600"))
	return n.waitEvent(uid, schemas.EventContainerStarted, 60*time.Second, nil).ContainerID
}

func TestRestartBeyondTheDuplicateWindowStoresNoEventTwice(t *testing.T) {
	t.Parallel()
	// NATS outlives jetlet, so its own clock says when the window expired.
	srv := natstest.RunServer(t)
	n := startNode(t, shortDir(t), srv.ClientURL(), append(mountsTheHost, "--duplicate-window", "5s")...)
	// "later" waits for a go-ahead file, deletes it and exits 5: it exits
	// while jetlet is away.
	dir := shortDir(t)
	flag := filepath.Join(dir, "exit-now")
	n.publish("job", podJSON("job", 1, "Never", "exit 0"))
	n.publish("crash", podJSON("crash", 1, "Always", "exit 1"))
	n.publish("later", sharing(t, podJSON("later", 1, "Never", fmt.Sprintf("while [ ! -f %s ]; do sleep 0.05; done; rm %s; exit 5", flag, flag)), dir))
	n.waitStatus("job", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseSucceeded })
	n.waitStatus("later", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	// Restart 2 comes after a 10 s back-off, twice the window, with a
	// BackOff said every second.
	n.waitStatus("crash", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Containers[0].RestartCount >= 2 })

	n.proc.Signal(syscall.SIGKILL)
	n.proc.Wait(30 * time.Second)
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, poll.Msg("the container to take its go-ahead"), func() bool {
		_, err := os.Stat(flag)
		return os.IsNotExist(err)
	})
	jetlettest.WaitDuplicateWindow(t, n.js, "jetlet.event.probe.window.BackOff", 60*time.Second)
	restartedAt := time.Now()
	n.start()

	// The crash loop goes on: one more back-off period after the restart.
	crash := n.waitStatus("crash", 30*time.Second, func(*schemas.PodStatus) bool { return true })
	before := crash.Containers[0].RestartCount
	n.waitStatus("crash", 90*time.Second, func(st *schemas.PodStatus) bool { return st.Containers[0].RestartCount >= before+2 })
	settled := settle(t, n, "settle")
	crash, _ = n.status("crash")

	evs, counts := nodeEvents(t, n)
	diedOf, backOffs := map[string]int{}, 0
	for _, ev := range evs {
		switch ev.Type {
		case schemas.EventContainerDied:
			diedOf[ev.UID]++
			if ev.UID == "later" && (ev.ExitCode == nil || *ev.ExitCode != 5 || !ev.Time.Before(restartedAt)) {
				t.Errorf("later's ContainerDied: exit %v at %s, want 5 at its exit, before the restart at %s", ev.ExitCode, ev.Time, restartedAt)
			}
		case schemas.EventBackOff:
			if ev.UID == "crash" {
				backOffs++
			}
		}
	}
	// Every instance has exited but settle's and crash's newest.
	live := map[string]bool{settled: true, crash.Containers[0].ContainerID: true}
	for id, c := range counts {
		if c[schemas.EventContainerCreated] != 1 || c[schemas.EventContainerStarted] != 1 {
			t.Errorf("container %s: %d ContainerCreated and %d ContainerStarted, want one each", id, c[schemas.EventContainerCreated], c[schemas.EventContainerStarted])
		}
		if !live[id] && c[schemas.EventContainerDied] != 1 {
			t.Errorf("container %s exited: %d ContainerDied, want 1", id, c[schemas.EventContainerDied])
		}
	}
	if diedOf["job"] != 1 || diedOf["later"] != 1 {
		t.Errorf("ContainerDied of job %d, of later %d; want one each", diedOf["job"], diedOf["later"])
	}
	// One BackOff per back-off period: at most one per restart (restart 1
	// comes at once, and so does the first after jetlet's restart), and the
	// periods before and after jetlet's restart each had one.
	if restarts := int(crash.Containers[0].RestartCount); backOffs > restarts || backOffs < 2 {
		t.Errorf("%d BackOff events for %d restarts, want one per back-off period (at least 2)", backOffs, restarts)
	}
}

// Starting a pod costs the cluster's meta layer nothing: no consumer is
// created or deleted for its events' ledger or its result, so the number of
// consumers (a Raft group each, a limit per stream) does not grow with the
// pods started.
func TestAPodStartCreatesNoConsumer(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	nc := n.js.Conn()
	advisories, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.CONSUMER.>")
	if err != nil {
		t.Fatal(err)
	}
	const pods = 5
	for i := range pods {
		uid := fmt.Sprintf("p%d", i)
		n.publish(uid, podJSON(uid, 1, "Always", "exec sleep 600"))
	}
	// Waited on with direct gets: the test's own consumers would count.
	count := func(stream, filter string) (got int) {
		if _, err := natsjs.ReadStored(t.Context(), n.js, nil, stream, filter, time.Time{}, func(*jetstream.RawStreamMsg) error { got++; return nil }); err != nil {
			t.Fatal(err)
		}
		return got
	}
	poll.Until(t, time.Minute, poll.Msg("every pod started"), func() bool {
		return count(schemas.StreamEvents, "jetlet.event.n1.*.ContainerStarted") == pods
	})
	for i := range pods {
		uid := fmt.Sprintf("p%d", i)
		n.publish(uid, deleteJSON(uid, 2, 0))
	}
	poll.Until(t, time.Minute, poll.Msg("every pod terminated and each intent answered"), func() bool {
		return count(schemas.StreamEvents, "jetlet.event.n1.*.PodTerminated") == pods &&
			count(schemas.StreamResults, "jetlet.result.n1.*") == 2*pods
	})
	// What the server sent before this round trip has arrived.
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := advisories.Pending(); got != 0 {
		m, _ := advisories.NextMsg(0)
		t.Errorf("%d consumer advisories while %d pods started and were deleted, want 0; the first on %s: %s", got, pods, m.Subject, m.Data)
	}
}
