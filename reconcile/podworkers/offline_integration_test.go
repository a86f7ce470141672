package podworkers_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// TestStartOfflineHoldsWhatItDoesNotNameAndResumeTakesTheStream: started
// from a checkpoint, the pod workers run its pods and leave the runtime's
// other pods alone; Resume with the stream's desired state syncs what
// differs, adopts a held pod the stream wants and deletes, as orphans, a
// held pod and a checkpoint's pod the stream does not want.
func TestStartOfflineHoldsWhatItDoesNotNameAndResumeTakesTheStream(t *testing.T) {
	n := newNode(t)
	n.run()
	kept := apply("kept", corev1.RestartPolicyAlways, "exec sleep 600")
	held := apply("held", corev1.RestartPolicyAlways, "exec sleep 600")
	unwanted := apply("unwanted", corev1.RestartPolicyAlways, "exec sleep 600")
	dropped := apply("dropped", corev1.RestartPolicyAlways, "exec sleep 600")
	for _, d := range []podworkers.Desired{kept, held, unwanted, dropped} {
		mustSync(t, n.w, d)
	}
	heldStarted := n.sink.ofType("held", schemas.EventContainerStarted)

	// A start without the bus: the checkpoint names kept and dropped.
	n.runWith((*podworkers.Workers).StartOffline, []podworkers.Desired{kept, dropped})
	poll.Until(t, 30*time.Second, poll.Msg("the checkpoint's pods synced"), func() bool {
		st, dst := n.sink.lastStatus("kept"), n.sink.lastStatus("dropped")
		return st != nil && st.Phase == schemas.PhaseRunning && dst != nil && dst.Phase == schemas.PhaseRunning
	})
	if !n.pods()["held"] || !n.pods()["unwanted"] || n.sink.ofType("held", schemas.EventContainerKilled) != nil {
		t.Fatal("a pod the checkpoint does not name was killed offline")
	}

	// The stream wants kept with a new spec and held; not unwanted nor
	// dropped.
	newer := apply("kept", corev1.RestartPolicyAlways, "exec sleep 601")
	if err := n.w.Resume(t.Context(), []podworkers.Desired{newer, held}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 60*time.Second, poll.Msg("unwanted and dropped deleted as orphans"), func() bool {
		pods := n.pods()
		return !pods["unwanted"] && !pods["dropped"]
	})
	for _, uid := range []string{"unwanted", "dropped"} {
		if killed := n.sink.ofType(uid, schemas.EventContainerKilled); len(killed) != 1 || killed[0].Reason != schemas.ReasonOrphaned {
			t.Errorf("%s's ContainerKilled events %+v, want one with reason Orphaned", uid, killed)
		}
	}
	if st := n.sink.lastStatus("kept"); st == nil || st.IntentSeq != newer.IntentSeq {
		t.Errorf("kept's status %+v, want at the stream's intent %d", st, newer.IntentSeq)
	}
	poll.Until(t, 30*time.Second, poll.Msg("held adopted"), func() bool {
		st := n.sink.lastStatus("held")
		return st != nil && st.IntentSeq == held.IntentSeq && st.Phase == schemas.PhaseRunning
	})
	if st := n.sink.lastStatus("held"); st.Containers[0].ContainerID != heldStarted[0].ContainerID {
		t.Errorf("held runs container %s, want %s adopted", st.Containers[0].ContainerID, heldStarted[0].ContainerID)
	}
}
