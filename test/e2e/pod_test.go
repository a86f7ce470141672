package e2e_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
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
		`jetlet_sync_duration_seconds_count`,
		`jetlet_relist_duration_seconds_count`,
		`jetlet_runtime_call_duration_seconds_count{method="RunPodSandbox"} 1`,
		`jetlet_events_buffered`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
