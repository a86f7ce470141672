package e2e_test

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/natstest"
)

func TestPodRunsAndIsDeleted(t *testing.T) {
	n := startNode(t, shortDir(t), "")
	n.publish("web", podJSON("web", 1, "Always", "echo hello; exec sleep 300"))
	r := n.results("web", 1)[0]
	if r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %s %+v", r.Outcome, r.Error, r.Actions)
	}
	n.waitStatus("web", 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	n.waitEvent("web", schemas.EventContainerStarted, 10*time.Second, nil)
	n.waitEvent("web", schemas.EventSandboxCreated, 10*time.Second, nil)

	n.publish("web", deleteJSON("web", 2, 2))
	r = n.results("web", 2)[1]
	if r.Outcome != schemas.OutcomeSynced || r.Op != schemas.OpDelete {
		t.Fatalf("delete: %s %s %+v", r.Outcome, r.Error, r.Actions)
	}
	n.waitEvent("web", schemas.EventPodTerminated, 10*time.Second, nil)
	n.waitEvent("web", schemas.EventContainerDied, 10*time.Second, func(ev schemas.LifecycleEvent) bool {
		return ev.ExitCode != nil && *ev.ExitCode != 0
	})
	st := n.waitStatus("web", 10*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseTerminated })
	if c := st.Containers; len(c) != 1 || c[0].State != schemas.ContainerExited {
		t.Errorf("Terminated status containers %+v, want app Exited", c)
	}

	resp, err := http.Get(n.proc.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`jetlet_intents_total{outcome="Synced"} 2`,
		`jetlet_pods{phase="Running"} 0`,
		`jetlet_sync_duration_seconds_count{outcome="success"}`,
		`jetlet_relist_duration_seconds_count`,
		`jetlet_runtime_call_duration_seconds_count{method="RunPodSandbox"} 1`,
		`jetlet_events_buffered`,
		`jetlet_nats_connected 1`,
		`jetlet_build_info{goversion="go`,
		// Counters are there at 0 before anything has gone wrong.
		`jetlet_intents_total{outcome="Rejected"} 0`,
		`jetlet_publish_failures_total{kind="result"} 0`,
		`jetlet_permission_denied_total{what="intent"} 0`,
		`jetlet_runtime_call_errors_total{method="RunPodSandbox"} 0`,
		`jetlet_sync_duration_seconds_count{outcome="failure"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestAPodNoIntentWantsIsDeletedAsAnOrphan(t *testing.T) {
	srv := natstest.RunServer(t)
	n := startNode(t, shortDir(t), srv.ClientURL())
	n.publish("orphan", podJSON("orphan", 1, "Always", "exec sleep 600"))
	n.publish("kept", podJSON("kept", 1, "Always", "exec sleep 600"))
	for _, uid := range []string{"orphan", "kept"} {
		n.waitStatus(uid, 30*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	}

	// jetlet stops (its pods keep running) and the orphan's intents go.
	n.proc.Signal(syscall.SIGTERM)
	if code := n.proc.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	stream, err := n.js.Stream(t.Context(), schemas.StreamIntents)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(t.Context(), jetstream.WithPurgeSubject("jetlet.intent.n1.orphan")); err != nil {
		t.Fatal(err)
	}
	n.start()

	line := n.proc.WaitLog("deleting an orphaned pod: the runtime runs it and no intent wants it", 30*time.Second)
	if line["level"] != "warn" || line["uid"] != "orphan" || line["pod"] != "default/p-orphan" {
		t.Errorf("orphan log line %v, want level warn naming the pod", line)
	}
	killed := n.waitEvent("orphan", schemas.EventContainerKilled, 30*time.Second, nil)
	if killed.Reason != schemas.ReasonOrphaned {
		t.Errorf("ContainerKilled reason %q, want Orphaned", killed.Reason)
	}
	term := n.waitEvent("orphan", schemas.EventPodTerminated, 30*time.Second, nil)
	if term.Reason != schemas.ReasonOrphaned || !strings.Contains(term.Message, "orphaned") {
		t.Errorf("PodTerminated %q %q, want reason Orphaned and a message saying orphaned", term.Reason, term.Message)
	}
	n.waitStatus("orphan", 10*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseTerminated })
	// The pod with an intent is adopted, not killed.
	if evs := readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event.n1.kept.ContainerKilled"); len(evs) != 0 {
		t.Errorf("the pod with an intent had containers killed: %+v", evs)
	}
}
