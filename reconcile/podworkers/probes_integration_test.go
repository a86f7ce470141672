package podworkers_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// syncs is how many syncs the pod workers have run.
func (n *node) syncs() uint64 { return n.histogramCount("jetlet_sync_duration_seconds") }

// relists is how many relists have run.
func (n *node) relists() uint64 { return n.histogramCount("jetlet_relist_duration_seconds") }

// histogramCount is the sample count of a histogram, over its labels.
func (n *node) histogramCount(name string) uint64 {
	n.t.Helper()
	families, err := n.reg.Gather()
	if err != nil {
		n.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			var count uint64
			for _, m := range f.GetMetric() {
				count += m.GetHistogram().GetSampleCount()
			}
			return count
		}
	}
	n.t.Fatal("no " + name)
	return 0
}

// quietSyncs waits until two relists in a row have passed without a sync
// (so that any sync a relist woke is done) and returns the syncs so far.
func (n *node) quietSyncs() uint64 {
	n.t.Helper()
	syncs, since := n.syncs(), n.relists()
	poll.Until(n.t, 30*time.Second, poll.Msg("two relists without a sync"), func() bool {
		if s := n.syncs(); s != syncs {
			syncs, since = s, n.relists()
		}
		return n.relists() >= since+2
	})
	return syncs
}

func readyCondition(st *schemas.PodStatus) schemas.PodCondition {
	for _, c := range st.Conditions {
		if c.Type == schemas.PodReady {
			return c
		}
	}
	return schemas.PodCondition{}
}

func TestAReadinessChangeRewritesTheStatusWithoutASync(t *testing.T) {
	n := newNode(t)
	n.run()
	// The probe runs in the container, whose /tmp is its own: the flag is in
	// a hostPath volume at the same path.
	shared := filepath.Join(n.dir, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(shared, "ready")
	want := apply("web", corev1.RestartPolicyAlways, "exec sleep 600")
	spec := &want.Intent.Pod.Spec
	spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: shared}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: shared}}
	spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", ready}}}}
	mustSync(t, n.w, want)
	poll.Until(t, 30*time.Second, poll.Msg("web running, not ready"), func() bool {
		st := n.sink.lastStatus("web")
		return st != nil && st.Phase == schemas.PhaseRunning && !st.Containers[0].Ready && readyCondition(st).Status == schemas.ConditionFalse
	})
	notReadySince := readyCondition(n.sink.lastStatus("web")).LastTransitionTime

	if err := os.WriteFile(ready, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, poll.Msg("web ready"), func() bool {
		st := n.sink.lastStatus("web")
		return st.Containers[0].Ready && readyCondition(st).Status == schemas.ConditionTrue
	})
	if got := readyCondition(n.sink.lastStatus("web")).LastTransitionTime; !got.After(notReadySince) {
		t.Errorf("Ready's lastTransitionTime %v did not move on from %v", got, notReadySince)
	}
	// The relist's first sight of the new pod may wake a background sync;
	// once the syncs are quiet, only the probe changes anything.
	synced := n.quietSyncs()
	if err := os.Remove(ready); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, poll.Msg("web not ready again"), func() bool {
		return !n.sink.lastStatus("web").Containers[0].Ready
	})
	if got := n.syncs(); got != synced {
		t.Errorf("%d syncs while only readiness changed, want none", got-synced)
	}
	if killed := n.sink.ofType("web", schemas.EventContainerKilled); len(killed) != 0 {
		t.Errorf("a readiness failure killed the container: %+v", killed)
	}
}

// A pod whose container stops answering its readiness probe when told to
// stop, and takes its time to exit: its Terminating status turns Ready False
// before the pod is gone, as kubelet's (readiness is probed while a pod
// terminates).
func TestATerminatingPodTurnsUnreadyWhenItStopsAnswering(t *testing.T) {
	n := newNode(t)
	n.run()
	shared := filepath.Join(n.dir, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	ready, exit := filepath.Join(shared, "ready"), filepath.Join(shared, "exit")
	want := apply("slow", corev1.RestartPolicyAlways,
		`trap 'rm -f `+ready+`; until [ -f `+exit+` ]; do sleep 0.1; done; exit 0' TERM; touch `+ready+`; while :; do sleep 0.1; done`)
	spec := &want.Intent.Pod.Spec
	grace := int64(600)
	spec.TerminationGracePeriodSeconds = &grace
	spec.Volumes = []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: shared}}}}
	spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "shared", MountPath: shared}}
	spec.Containers[0].ReadinessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", ready}}}}
	spec.Containers[0].LivenessProbe = &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1,
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "-f", ready}}}}
	mustSync(t, n.w, want)
	poll.Until(t, 30*time.Second, poll.Msg("slow ready"), func() bool {
		st := n.sink.lastStatus("slow")
		return st != nil && readyCondition(st).Status == schemas.ConditionTrue
	})

	deleted := make(chan podworkers.Report, 1)
	go func() { deleted <- n.w.Sync(t.Context(), deleteOf("slow")) }()
	var st *schemas.PodStatus
	poll.Until(t, 30*time.Second, poll.Msg("a Terminating status"), func() bool {
		st = n.sink.lastStatus("slow")
		return st.Phase == schemas.PhaseTerminating
	})
	if readyCondition(st).Status != schemas.ConditionTrue {
		t.Fatalf("the delete's first status is not ready: %+v", st.Conditions)
	}
	poll.Until(t, 30*time.Second, poll.Msg("Terminating and not ready"), func() bool {
		st := n.sink.lastStatus("slow")
		return st.Phase == schemas.PhaseTerminating && readyCondition(st).Status == schemas.ConditionFalse && !st.Containers[0].Ready
	})
	if err := os.WriteFile(exit, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if rep := <-deleted; rep.Err != nil || rep.Status.Phase != schemas.PhaseTerminated {
		t.Fatalf("delete: %v, %+v", rep.Err, rep.Status)
	}
	// The liveness probe, checking what readiness does, stopped with the
	// delete: only readiness failed.
	for _, ev := range n.sink.ofType("slow", schemas.EventUnhealthy) {
		if ev.Probe != schemas.ProbeReadiness {
			t.Errorf("Unhealthy %+v while the pod terminated, want readiness only", ev)
		}
	}
}
