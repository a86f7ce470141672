package e2e_test

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// checkOneResultEach asserts that every intent in seqs has exactly one
// result, and that each pod's results come in intent order. results must be
// settled (node.settledResults), so that a late duplicate is in them.
func checkOneResultEach(t *testing.T, results []schemas.SyncResult, seqs map[uint64]string) (outcomes map[schemas.Outcome]int) {
	t.Helper()
	outcomes = map[schemas.Outcome]int{}
	seen := map[uint64]int{}
	last := map[string]uint64{}
	for _, r := range results {
		seen[r.IntentSeq]++
		if uid, ok := seqs[r.IntentSeq]; !ok || uid != r.UID {
			t.Errorf("result for intent %d names pod %s, want %s", r.IntentSeq, r.UID, uid)
		}
		if r.IntentSeq < last[r.UID] {
			t.Errorf("pod %s: result for intent %d stored after %d", r.UID, r.IntentSeq, last[r.UID])
		}
		last[r.UID] = r.IntentSeq
		outcomes[r.Outcome]++
	}
	for seq := range seqs {
		if seen[seq] != 1 {
			t.Errorf("intent %d has %d results, want 1", seq, seen[seq])
		}
	}
	return outcomes
}

func TestInterleavedIntentsGetOneResultEach(t *testing.T) {
	t.Parallel()
	n := startNode(t, shortDir(t), "", "--workers", "8")
	const uids, rounds = 50, 4
	seqs := map[uint64]string{}
	for round := range rounds {
		for u := range uids {
			uid := fmt.Sprintf("burst-%02d", u)
			seqs[n.publish(uid, podJSON(uid, int64(round+1), "Always", fmt.Sprintf("exec sleep %d", 300+round)))] = uid
		}
	}
	waitMsgs[schemas.SyncResult](t, n.js, schemas.StreamResults, "jetlet.result.n1.>", uids*rounds, 120*time.Second)
	outcomes := checkOneResultEach(t, n.settledResults(), seqs)
	if outcomes[schemas.OutcomeSynced]+outcomes[schemas.OutcomeSuperseded] != uids*rounds {
		t.Errorf("outcomes %v: want only Synced and Superseded", outcomes)
	}
	t.Logf("outcomes: %v", outcomes)
	// Every pod ends running its newest spec.
	for u := range uids {
		uid := fmt.Sprintf("burst-%02d", u)
		n.waitStatus(uid, 60*time.Second, func(st *schemas.PodStatus) bool {
			return st.Revision == rounds && st.Phase == schemas.PhaseRunning
		})
	}
}

func TestBadIntentsAreAnsweredAndOthersCarryOn(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	bad := map[string]struct{ body, want string }{
		"notjson":  {`{"apiVersion": "jetlet.dev/v1", oops`, "malformed"},
		"wronguid": {podJSON("someone-else", 1, "Always", "sleep 1"), "pod.metadata.uid"},
		"pvc": {`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","pod":{"metadata":{"name":"p","namespace":"default","uid":"pvc"},
		  "spec":{"volumes":[{"name":"d","persistentVolumeClaim":{"claimName":"c"}}],
		  "containers":[{"name":"app","image":"busybox","command":["true"]}]}}}`, "persistentVolumeClaim"},
		"priv": {`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","pod":{"metadata":{"name":"p","namespace":"default","uid":"priv"},
		  "spec":{"containers":[{"name":"app","image":"busybox","command":["true"],"securityContext":{"privileged":true}}]}}}`, "privileged"},
		// kubelet would make its sandbox first, then wait with InvalidImageName.
		"badimage": {`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","pod":{"metadata":{"name":"p","namespace":"default","uid":"badimage"},
		  "spec":{"containers":[{"name":"app","image":"Busy Box:?","command":["true"]}]}}}`, `pod.spec.containers[0].image: invalid: not an image reference`},
	}
	for uid, c := range bad {
		n.publish(uid, c.body)
	}
	if _, err := n.js.Publish(t.Context(), "jetlet.intent.n1", []byte(podJSON("x", 1, "Always", "true"))); err != nil {
		t.Fatal(err)
	}
	n.publish("fine", podJSON("fine", 1, "Always", "exec sleep 300"))

	for uid, c := range bad {
		r := n.results(uid, 1)[0]
		if r.Outcome != schemas.OutcomeRejected || !strings.Contains(r.Error, c.want) {
			t.Errorf("%s: %s %q, want Rejected naming %q", uid, r.Outcome, r.Error, c.want)
		}
		n.waitEvent(uid, schemas.EventIntentRejected, 10*time.Second, nil)
		if made := readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event."+n.name+"."+uid+".SandboxCreated"); len(made) != 0 {
			t.Errorf("%s: a rejected intent got a sandbox: %+v", uid, made)
		}
	}
	if r := n.results("fine", 1)[0]; r.Outcome != schemas.OutcomeSynced {
		t.Errorf("fine: %s %s", r.Outcome, r.Error)
	}
	dead := waitMsgs[json.RawMessage](t, n.js, schemas.StreamDead, "jetlet.dead.n1", 1, 10*time.Second)
	if len(dead) != 1 {
		t.Errorf("%d dead letters, want 1", len(dead))
	}
}

func TestContainerExitIsSeenAndRestartedWithBackOff(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	n.publish("crash", podJSON("crash", 1, "Always", "echo dying; exit 3"))
	died := n.waitEvent("crash", schemas.EventContainerDied, 10*time.Second, nil)
	if died.ExitCode == nil || *died.ExitCode != 3 || died.Reason != schemas.ReasonError {
		t.Errorf("ContainerDied exit %v reason %q, want 3 and Error", died.ExitCode, died.Reason)
	}
	// kubelet restarts at once after the first crash, then backs off 10 s.
	n.waitStatus("crash", 30*time.Second, func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && st.Containers[0].RestartCount >= 1
	})
	n.waitEvent("crash", schemas.EventBackOff, 30*time.Second, nil)
	st := n.waitStatus("crash", 30*time.Second, func(st *schemas.PodStatus) bool {
		return st.Containers[0].Reason == "CrashLoopBackOff"
	})
	if st.Containers[0].ExitCode != 3 {
		t.Errorf("last exit code %d, want 3", st.Containers[0].ExitCode)
	}
}

func TestOnFailureExitZeroIsNotRestarted(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	n.publish("job", podJSON("job", 1, "OnFailure", "echo done"))
	n.waitEvent("job", schemas.EventContainerDied, 10*time.Second, func(ev schemas.LifecycleEvent) bool {
		return ev.ExitCode != nil && *ev.ExitCode == 0 && ev.Reason == schemas.ReasonCompleted
	})
	st := n.waitStatus("job", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseSucceeded })
	if st.Containers[0].RestartCount != 0 {
		t.Errorf("restart count %d, want 0", st.Containers[0].RestartCount)
	}
}

func TestSIGKILLMidBurstLosesAndDuplicatesNothing(t *testing.T) {
	dir := shortDir(t)
	// A duplicate window shorter than a restart: only the event ledger keeps
	// each event once.
	n := startNode(t, dir, "", "--duplicate-window", "1s")
	// The embedded NATS dies with jetlet: each start is on the same data dir
	// and port.
	n.extra = append(n.extra, "--nats-listen", strings.TrimPrefix(n.proc.NATSURL(), "nats://"))
	const rounds, perRound = 3, 20
	seqs := map[uint64]string{}
	uid := func(round, i int) string { return fmt.Sprintf("k%d-%02d", round, i) }
	job := func(i int) bool { return i%4 == 0 } // runs to completion
	burst := func(round int, rev int64) {
		for i := range perRound {
			body := podJSON(uid(round, i), rev, "Always", "exec sleep 600")
			if job(i) {
				body = podJSON(uid(round, i), rev, "Never", "exit 0")
			}
			seqs[n.publish(uid(round, i), body)] = uid(round, i)
		}
	}
	// Each round a burst of new pods, and jetlet is killed while it works
	// through it, between any CRI call and its event.
	for round := range rounds {
		burst(round, 1)
		waitMsgs[schemas.SyncResult](t, n.js, schemas.StreamResults, "jetlet.result.n1.>", round*perRound+5, 60*time.Second)
		n.proc.Signal(syscall.SIGKILL)
		n.proc.Wait(30 * time.Second)
		n.start()
	}
	for round := range rounds {
		burst(round, 2)
	}
	waitMsgs[schemas.SyncResult](t, n.js, schemas.StreamResults, "jetlet.result.n1.>", len(seqs), 120*time.Second)
	checkOneResultEach(t, n.settledResults(), seqs)
	for round := range rounds {
		for i := range perRound {
			n.waitStatus(uid(round, i), 60*time.Second, func(st *schemas.PodStatus) bool {
				if job(i) {
					return st.Phase == schemas.PhaseSucceeded
				}
				return st.Revision == 2 && st.Phase == schemas.PhaseRunning
			})
		}
	}
	settle(t, n, "settle")

	// Each pod's container started once (the specs differ only by
	// revision, which is not part of the container spec) and is told so
	// once, a job's exit once; no event is stored twice.
	evs, counts := nodeEvents(t, n)
	started, died := map[string]int{}, map[string]int{}
	for _, ev := range evs {
		switch ev.Type {
		case schemas.EventContainerStarted:
			started[ev.UID]++
		case schemas.EventContainerDied:
			died[ev.UID]++
		}
	}
	for round := range rounds {
		for i := range perRound {
			want := 0
			if job(i) {
				want = 1
			}
			if u := uid(round, i); started[u] != 1 || died[u] != want {
				t.Errorf("pod %s: %d ContainerStarted and %d ContainerDied, want 1 and %d", u, started[u], died[u], want)
			}
		}
	}
	for id, c := range counts {
		if c[schemas.EventContainerCreated] != 1 {
			t.Errorf("container %s: %d ContainerCreated, want 1", id, c[schemas.EventContainerCreated])
		}
	}
}

func TestSIGTERMLeavesPodsRunningAndRestartAdoptsThem(t *testing.T) {
	dir := shortDir(t)
	n := startNode(t, dir, "")
	url := n.proc.NATSURL()
	n.publish("keep", podJSON("keep", 1, "Always", "exec sleep 600"))
	before := n.waitStatus("keep", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })

	n.proc.Signal(syscall.SIGTERM)
	if code := n.proc.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	n.extra = append(n.extra, "--nats-listen", strings.TrimPrefix(url, "nats://"))
	n.start()
	// A no-op intent after the restart proves the pod was resynced.
	n.publish("keep", podJSON("keep", 2, "Always", "exec sleep 600"))
	r := n.results("keep", 2)[1]
	if r.Outcome != schemas.OutcomeSynced || len(r.Actions) != 0 {
		t.Errorf("after restart: %s %+v, want Synced with no action", r.Outcome, r.Actions)
	}
	after := n.waitStatus("keep", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Revision == 2 })
	if a, b := after.Containers[0], before.Containers[0]; a.ContainerID != b.ContainerID || a.RestartCount != 0 {
		t.Errorf("container %s (restarts %d) after restart, want %s adopted with no restart", a.ContainerID, a.RestartCount, b.ContainerID)
	}
	// The conditions did not change: they keep their transition times, as
	// kubelet keeps the ones it reads back from the API server.
	if len(after.Conditions) != len(before.Conditions) || len(before.Conditions) == 0 {
		t.Fatalf("conditions %+v after restart, %+v before", after.Conditions, before.Conditions)
	}
	for i, c := range before.Conditions {
		if a := after.Conditions[i]; a.Type != c.Type || a.Status != c.Status || !a.LastTransitionTime.Equal(c.LastTransitionTime) {
			t.Errorf("condition %+v after restart, %+v before", a, c)
		}
	}
}

func TestNATSRestartUnderJetlet(t *testing.T) {
	opts := natstest.Options(t.TempDir())
	srv := natstest.Start(t, opts)
	opts.Port = srv.Addr().(*net.TCPAddr).Port
	n := startNode(t, shortDir(t), srv.ClientURL(), mountsTheHost...)
	// The container waits for a go-ahead file, deletes it and exits 5, so the
	// test knows when it has exited without asking jetlet.
	dir := shortDir(t)
	flag := filepath.Join(dir, "exit-now")
	n.publish("a", sharing(t, podJSON("a", 1, "Never", fmt.Sprintf("while [ ! -f %s ]; do sleep 0.05; done; rm %s; exit 5", flag, flag)), dir))
	n.waitStatus("a", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })

	srv.Shutdown()
	srv.WaitForShutdown()
	// The container exits while NATS is away.
	if err := os.WriteFile(flag, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, poll.Msg("the container to take its go-ahead"), func() bool {
		_, err := os.Stat(flag)
		return os.IsNotExist(err)
	})
	natstest.Start(t, opts)

	// jetlet reconnects, reports what happened meanwhile, and carries on.
	n.waitEvent("a", schemas.EventContainerDied, 30*time.Second, func(ev schemas.LifecycleEvent) bool {
		return ev.ExitCode != nil && *ev.ExitCode == 5
	})
	n.waitStatus("a", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseFailed })
	n.publish("b", podJSON("b", 1, "Never", "exit 7"))
	if r := n.results("b", 1)[0]; r.Outcome != schemas.OutcomeSynced {
		t.Errorf("after the NATS restart: %s %s", r.Outcome, r.Error)
	}
	n.waitEvent("b", schemas.EventContainerDied, 20*time.Second, func(ev schemas.LifecycleEvent) bool {
		return ev.ExitCode != nil && *ev.ExitCode == 7
	})
}
