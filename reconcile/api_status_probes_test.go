package reconcile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
)

func TestToAPIStatusStartedReadyAndConditions(t *testing.T) {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	type want struct {
		started, ready  [3]bool
		initialized     schemas.ConditionStatus
		containersReady schemas.ConditionStatus
		reason          string
	}
	cases := []struct {
		name      string
		mutate    func(*corev1.Pod, *kubecontainer.PodStatus)
		startup   fakeProbes
		readiness fakeProbes
		want      want
	}{
		{"no probes: all started and ready", func(*corev1.Pod, *kubecontainer.PodStatus) {}, nil, nil,
			want{[3]bool{true, true, true}, [3]bool{true, true, true}, schemas.ConditionTrue, schemas.ConditionTrue, ""}},
		{"readiness failing on one", func(p *corev1.Pod, _ *kubecontainer.PodStatus) { p.Spec.Containers[1].ReadinessProbe = probe },
			nil, fakeProbes{"id2": kubecontainer.ProbeFailure},
			want{[3]bool{true, true, true}, [3]bool{true, false, true}, schemas.ConditionTrue, schemas.ConditionFalse, reasonContainersNotReady}},
		{"readiness passed", func(p *corev1.Pod, _ *kubecontainer.PodStatus) { p.Spec.Containers[1].ReadinessProbe = probe },
			nil, fakeProbes{"id2": kubecontainer.ProbeSuccess},
			want{[3]bool{true, true, true}, [3]bool{true, true, true}, schemas.ConditionTrue, schemas.ConditionTrue, ""}},
		{"readiness not yet probed", func(p *corev1.Pod, _ *kubecontainer.PodStatus) { p.Spec.Containers[1].ReadinessProbe = probe },
			nil, fakeProbes{},
			want{[3]bool{true, true, true}, [3]bool{true, false, true}, schemas.ConditionTrue, schemas.ConditionFalse, reasonContainersNotReady}},
		{"startup not passed: neither started nor ready, whatever readiness says", func(p *corev1.Pod, _ *kubecontainer.PodStatus) {
			p.Spec.Containers[0].StartupProbe, p.Spec.Containers[0].ReadinessProbe = probe, probe
		}, fakeProbes{"id1": kubecontainer.ProbeUnknown}, fakeProbes{"id1": kubecontainer.ProbeSuccess},
			want{[3]bool{false, true, true}, [3]bool{false, true, true}, schemas.ConditionTrue, schemas.ConditionFalse, reasonContainersNotReady}},
		{"startup passed", func(p *corev1.Pod, _ *kubecontainer.PodStatus) { p.Spec.Containers[0].StartupProbe = probe },
			fakeProbes{"id1": kubecontainer.ProbeSuccess}, nil,
			want{[3]bool{true, true, true}, [3]bool{true, true, true}, schemas.ConditionTrue, schemas.ConditionTrue, ""}},
		{"an exited container is neither started nor ready", func(_ *corev1.Pod, s *kubecontainer.PodStatus) {
			s.ContainerStatuses[2].State = kubecontainer.ContainerExited
		},
			nil, nil,
			want{[3]bool{true, true, false}, [3]bool{true, true, false}, schemas.ConditionTrue, schemas.ConditionFalse, reasonContainersNotReady}},
		{"a sidecar that is not ready makes the pod not ready", func(p *corev1.Pod, s *kubecontainer.PodStatus) {
			p.Spec.InitContainers = []corev1.Container{{Name: "side", RestartPolicy: new(corev1.ContainerRestartPolicyAlways), ReadinessProbe: probe}}
			s.ContainerStatuses = append(s.ContainerStatuses, &kubecontainer.ContainerStatus{ID: "side1", Name: "side", State: kubecontainer.ContainerRunning, Init: true})
		}, nil, fakeProbes{"side1": kubecontainer.ProbeFailure},
			want{[3]bool{true, true, true}, [3]bool{true, true, true}, schemas.ConditionTrue, schemas.ConditionFalse, reasonContainersNotReady}},
		{"init containers not done", func(p *corev1.Pod, s *kubecontainer.PodStatus) {
			addInitContainers(p)
			s.ContainerStatuses = nil
		}, nil, nil,
			want{[3]bool{}, [3]bool{}, schemas.ConditionFalse, schemas.ConditionFalse, reasonContainersNotReady}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod, status := makeBasePodAndStatus()
			tc.mutate(pod, status)
			m, _ := newTestManager(t, fakecri.New())
			if tc.startup != nil {
				m.cfg.Startup = tc.startup
			}
			if tc.readiness != nil {
				m.cfg.Readiness = tc.readiness
			}
			api := m.ToAPIStatus(pod, status)
			for i, c := range api.Containers {
				if c.Started != tc.want.started[i] || c.Ready != tc.want.ready[i] {
					t.Errorf("%s: started %v ready %v, want %v %v", c.Name, c.Started, c.Ready, tc.want.started[i], tc.want.ready[i])
				}
			}
			conds := map[schemas.PodConditionType]schemas.PodCondition{}
			for _, c := range api.Conditions {
				conds[c.Type] = c
				if !c.LastTransitionTime.Equal(api.ObservedAt) {
					t.Errorf("%s: lastTransitionTime %v, want the observation time", c.Type, c.LastTransitionTime)
				}
			}
			if len(api.Conditions) != 3 || conds[schemas.PodInitialized].Status != tc.want.initialized ||
				conds[schemas.PodContainersReady].Status != tc.want.containersReady || conds[schemas.PodReady].Status != tc.want.containersReady ||
				conds[schemas.PodReady].Reason != tc.want.reason {
				t.Fatalf("conditions %+v", api.Conditions)
			}
		})
	}
}

func TestToAPIStatusSucceededPodIsNotReady(t *testing.T) {
	pod, status := makeBasePodAndStatus()
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	for _, cs := range status.ContainerStatuses {
		cs.State = kubecontainer.ContainerExited
	}
	m, _ := newTestManager(t, fakecri.New())
	api := m.ToAPIStatus(pod, status)
	if api.Phase != schemas.PhaseSucceeded {
		t.Fatalf("phase %s", api.Phase)
	}
	for _, c := range api.Conditions {
		if c.Reason != reasonPodCompleted || (c.Type == schemas.PodInitialized) != (c.Status == schemas.ConditionTrue) {
			t.Fatalf("conditions %+v", api.Conditions)
		}
	}
}
