package bridge

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/schemas"
)

func TestStatusOf(t *testing.T) {
	at := time.Date(2026, 12, 6, 20, 0, 0, 0, time.UTC)
	basePod := func() *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{
			QOSClass:   corev1.PodQOSBurstable,
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionFalse}},
		}}
	}
	baseStatus := func() *schemas.PodStatus {
		return &schemas.PodStatus{
			Phase: schemas.PhaseRunning, ObservedAt: at,
			Sandbox:    &schemas.SandboxStatus{IPs: []string{"10.1.0.5"}},
			Conditions: []schemas.PodCondition{{Type: schemas.PodReady, Status: schemas.ConditionTrue, LastTransitionTime: at}},
			Containers: []schemas.ContainerStatus{{Name: "app", ContainerID: "embedded://c1", Image: "busybox:1.36", State: schemas.ContainerRunning,
				StartedAt: at.Format(time.RFC3339Nano), Ready: true, Started: true, RestartCount: 2,
				LastState: &schemas.LastState{ExitCode: 137, Reason: "OOMKilled", FinishedAt: at.Add(-time.Minute).Format(time.RFC3339Nano)}}},
		}
	}
	tests := []struct {
		name  string
		edit  func(*corev1.Pod, *schemas.PodStatus)
		check func(*testing.T, corev1.PodStatus)
	}{
		{"running", func(*corev1.Pod, *schemas.PodStatus) {}, func(t *testing.T, s corev1.PodStatus) {
			if s.Phase != corev1.PodRunning || s.PodIP != "10.1.0.5" || s.HostIP != "192.0.2.1" || len(s.HostIPs) != 1 || s.QOSClass != corev1.PodQOSBurstable {
				t.Errorf("status %+v", s)
			}
			if len(s.Conditions) != 2 || s.Conditions[0].Type != corev1.PodScheduled || s.Conditions[1].Type != corev1.PodReady || s.Conditions[1].Status != corev1.ConditionTrue {
				t.Errorf("conditions %+v: want the scheduler's kept, Ready the node's", s.Conditions)
			}
			c := s.ContainerStatuses[0]
			if c.State.Running == nil || !c.State.Running.StartedAt.Time.Equal(at) || !c.Ready || c.Started == nil || !*c.Started || c.RestartCount != 2 {
				t.Errorf("container %+v", c)
			}
			if l := c.LastTerminationState.Terminated; l == nil || l.ExitCode != 137 || l.Reason != "OOMKilled" {
				t.Errorf("last state %+v", c.LastTerminationState)
			}
			if s.StartTime == nil || !s.StartTime.Time.Equal(at) {
				t.Errorf("start time %v, want the first status's", s.StartTime)
			}
		}},
		{"start time kept", func(p *corev1.Pod, _ *schemas.PodStatus) { p.Status.StartTime = &metav1.Time{Time: at.Add(-time.Hour)} }, func(t *testing.T, s corev1.PodStatus) {
			if !s.StartTime.Time.Equal(at.Add(-time.Hour)) {
				t.Errorf("start time %v, want the pod's", s.StartTime)
			}
		}},
		{"refused", func(_ *corev1.Pod, st *schemas.PodStatus) {
			st.Phase, st.Reason, st.Message, st.Sandbox, st.Containers = schemas.PhaseFailed, "OutOfcpu", "Node didn't have enough resource: cpu", nil, nil
		}, func(t *testing.T, s corev1.PodStatus) {
			if s.Phase != corev1.PodFailed || s.Reason != "OutOfcpu" || s.Message == "" || s.PodIP != "" {
				t.Errorf("status %+v", s)
			}
		}},
		{"waiting", func(_ *corev1.Pod, st *schemas.PodStatus) {
			st.Phase = schemas.PhasePending
			st.Containers[0].State, st.Containers[0].Reason = schemas.ContainerWaiting, "ContainerCreating"
		}, func(t *testing.T, s corev1.PodStatus) {
			if w := s.ContainerStatuses[0].State.Waiting; s.Phase != corev1.PodPending || w == nil || w.Reason != "ContainerCreating" {
				t.Errorf("status %+v", s)
			}
		}},
		{"deleted after a kill", func(_ *corev1.Pod, st *schemas.PodStatus) {
			st.Phase = schemas.PhaseTerminated
			st.Containers[0].State, st.Containers[0].ExitCode = schemas.ContainerExited, 143
		}, func(t *testing.T, s corev1.PodStatus) {
			if x := s.ContainerStatuses[0].State.Terminated; s.Phase != corev1.PodFailed || x == nil || x.ExitCode != 143 {
				t.Errorf("status %+v", s)
			}
		}},
		{"deleted after exit 0", func(_ *corev1.Pod, st *schemas.PodStatus) {
			st.Phase = schemas.PhaseTerminated
			st.Containers[0].State = schemas.ContainerExited
		}, func(t *testing.T, s corev1.PodStatus) {
			if s.Phase != corev1.PodSucceeded {
				t.Errorf("phase %s, want Succeeded", s.Phase)
			}
		}},
		{"being deleted, still running", func(_ *corev1.Pod, st *schemas.PodStatus) { st.Phase = schemas.PhaseTerminating }, func(t *testing.T, s corev1.PodStatus) {
			if s.Phase != corev1.PodRunning {
				t.Errorf("phase %s, want Running", s.Phase)
			}
		}},
		{"resize pending", func(_ *corev1.Pod, st *schemas.PodStatus) {
			st.Conditions = append(st.Conditions, schemas.PodCondition{Type: schemas.PodResizePending, Status: schemas.ConditionTrue, Reason: "Infeasible"})
		}, func(t *testing.T, s corev1.PodStatus) {
			if c := s.Conditions[len(s.Conditions)-1]; c.Type != corev1.PodResizePending || c.Reason != "Infeasible" {
				t.Errorf("conditions %+v", s.Conditions)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, st := basePod(), baseStatus()
			tt.edit(pod, st)
			tt.check(t, statusOf(pod, st, []string{"192.0.2.1"}))
		})
	}
}

func TestHostIPsOf(t *testing.T) {
	rec := &schemas.NodeRecord{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "n1"},
		{Type: corev1.NodeExternalIP, Address: "203.0.113.9"},
		{Type: corev1.NodeInternalIP, Address: "192.0.2.1"},
		{Type: corev1.NodeInternalIP, Address: "192.0.2.2"},
		{Type: corev1.NodeInternalIP, Address: "2001:db8::1"},
	}}
	got := hostIPsOf(rec)
	if len(got) != 2 || got[0] != "192.0.2.1" || got[1] != "2001:db8::1" {
		t.Errorf("hostIPsOf = %v, want the first internal IPv4 then IPv6 (one per family)", got)
	}
}
