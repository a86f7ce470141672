package kubecontainer

import (
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas"
)

func TestPodFactsDerivesEveryFactWithItsTimeAndLiveID(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	pod := &PodStatus{
		UID: "u1", Name: "web", Namespace: "default",
		SandboxStatuses: []*runtimeapi.PodSandboxStatus{{Id: "s1", State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: at(0).UnixNano(), Metadata: &runtimeapi.PodSandboxMetadata{Attempt: 0}}},
		// Newest first, as GetPodStatus returns them.
		ContainerStatuses: []*ContainerStatus{
			{ID: "c3", Name: "app", SandboxID: "s1", State: ContainerCreated, CreatedAt: at(30), Attempt: 2},
			{ID: "c2", Name: "app", SandboxID: "s1", State: ContainerRunning, CreatedAt: at(20), StartedAt: at(21), Attempt: 1},
			{ID: "c1", Name: "app", SandboxID: "s1", State: ContainerExited, CreatedAt: at(1), StartedAt: at(2), FinishedAt: at(10), ExitCode: 3, Message: "boom"},
		},
	}
	// The ids are those a live emission of the fact has (EventID).
	type fact struct {
		id   string
		time time.Time
	}
	want := []fact{
		{"s1.SandboxCreated", at(0)},
		{"c1.ContainerCreated", at(1)},
		{"c1.ContainerStarted", at(2)},
		{"c1.ContainerDied", at(10)},
		{"c2.ContainerCreated", at(20)},
		{"c2.ContainerStarted", at(21)},
		{"c3.ContainerCreated", at(30)},
	}
	got := PodFacts("n1", pod)
	if len(got) != len(want) {
		t.Fatalf("%d facts, want %d: %+v", len(got), len(want), got)
	}
	for i, ev := range got {
		if ev.ID != want[i].id || !ev.Time.Equal(want[i].time) {
			t.Errorf("fact %d: %s at %s, want %s at %s", i, ev.ID, ev.Time, want[i].id, want[i].time)
		}
		if ev.Node != "n1" || ev.UID != "u1" || ev.Pod != "web" || ev.Namespace != "default" || ev.SandboxID != "s1" {
			t.Errorf("fact %d names the wrong pod: %+v", i, ev)
		}
	}
	died := got[3]
	if died.ExitCode == nil || *died.ExitCode != 3 || died.Reason != schemas.ReasonError || died.Message != "boom" || died.Container != "app" {
		t.Errorf("ContainerDied %+v, want exit 3, Error, boom, app", died)
	}
	if got[5].Attempt != 1 {
		t.Errorf("c2's attempt %d, want 1", got[5].Attempt)
	}
}
