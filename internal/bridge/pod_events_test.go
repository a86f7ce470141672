package bridge

import (
	"testing"

	"github.com/jetlet/jetlet/schemas"
)

func TestKubeEventOf(t *testing.T) {
	tests := []struct {
		event                schemas.LifecycleEvent
		typ, reason, message string
		recorded             bool
	}{
		{schemas.LifecycleEvent{Type: schemas.EventContainerStarted, Container: "app"}, "Normal", "Started", "Started container app", true},
		{schemas.LifecycleEvent{Type: schemas.EventUnhealthy, Container: "app", Probe: schemas.ProbeLiveness, Message: "HTTP probe failed with statuscode: 500"},
			"Warning", "Unhealthy", "Liveness probe failed: HTTP probe failed with statuscode: 500", true},
		{schemas.LifecycleEvent{Type: schemas.EventIntentRejected, Reason: "OutOfcpu", Message: "Node didn't have enough resource: cpu"},
			"Warning", "OutOfcpu", "Node didn't have enough resource: cpu", true},
		{schemas.LifecycleEvent{Type: schemas.EventSandboxCreated}, "", "", "", false},
		{schemas.LifecycleEvent{Type: schemas.EventStreamOpened}, "", "", "", false},
	}
	for _, tt := range tests {
		t.Run(string(tt.event.Type), func(t *testing.T) {
			k, ok := kubeEventOf(&tt.event)
			if ok != tt.recorded || ok && (k.typ != tt.typ || k.reason != tt.reason || k.message != tt.message) {
				t.Errorf("kubeEventOf = %+v, %v; want %s %s %q, %v", k, ok, tt.typ, tt.reason, tt.message, tt.recorded)
			}
		})
	}
}
