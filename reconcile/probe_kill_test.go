package reconcile

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
)

// A failed liveness or startup probe kills its container with the probe's own
// terminationGracePeriodSeconds when it has one, else the pod's.
func TestProbeKillTakesTheProbesGracePeriod(t *testing.T) {
	probeGrace, podGrace := int64(3), int64(30)
	probe := func(grace *int64) *corev1.Probe {
		return &corev1.Probe{TerminationGracePeriodSeconds: grace,
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	}
	cases := []struct {
		name      string
		container corev1.Container
		probes    func(id string) (liveness, startup kubecontainer.ProbeResults)
		reason    string
		want      int64
	}{
		{"liveness with its own grace", corev1.Container{LivenessProbe: probe(&probeGrace)},
			func(id string) (kubecontainer.ProbeResults, kubecontainer.ProbeResults) {
				return fakeProbes{id: kubecontainer.ProbeFailure}, nil
			}, schemas.ReasonLivenessProbe, probeGrace},
		{"startup with its own grace", corev1.Container{StartupProbe: probe(&probeGrace)},
			func(id string) (kubecontainer.ProbeResults, kubecontainer.ProbeResults) {
				return nil, fakeProbes{id: kubecontainer.ProbeFailure}
			}, schemas.ReasonStartupProbe, probeGrace},
		{"liveness without: the pod's", corev1.Container{LivenessProbe: probe(nil)},
			func(id string) (kubecontainer.ProbeResults, kubecontainer.ProbeResults) {
				return fakeProbes{id: kubecontainer.ProbeFailure}, nil
			}, schemas.ReasonLivenessProbe, podGrace},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := &stopRecorder{Runtime: fakecri.New()}
			m, events := newTestManager(t, rt)
			tc.container.Name, tc.container.Image, tc.container.Command = "app", "img:1", []string{"sleep"}
			pod := testPod(tc.container)
			pod.Spec.TerminationGracePeriodSeconds = &podGrace
			if err := syncOnce(t, m, pod).Error(); err != nil {
				t.Fatal(err)
			}
			st, err := m.GetPodStatus(t.Context(), string(pod.UID), pod.Name, pod.Namespace)
			if err != nil {
				t.Fatal(err)
			}
			id := st.FindContainerStatusByName("app").ID
			m.cfg.Liveness, m.cfg.Startup = tc.probes(id)
			if err := m.SyncPod(t.Context(), pod, st).Error(); err != nil {
				t.Fatal(err)
			}
			if len(rt.ids) != 1 || rt.ids[0] != id || rt.timeouts[0] != tc.want {
				t.Errorf("stopped %v with grace %v, want %s with %d", rt.ids, rt.timeouts, id, tc.want)
			}
			if killed := events.of(schemas.EventContainerKilled); len(killed) != 1 || killed[0].Reason != tc.reason {
				t.Errorf("ContainerKilled %+v, want one with reason %s", killed, tc.reason)
			}
		})
	}
}
