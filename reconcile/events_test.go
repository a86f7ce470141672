package reconcile

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
)

// A BackOff's id is the whole of <exited instance id>.<its restart
// count>.BackOff: two crashes in a row back off the second instance, whose
// restart count is 1, and every sync of the period says so with that one id.
func TestBackOffEventIDIsTheExitedInstanceAndItsRestartCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := fakecri.New()
		m, events := newTestManager(t, rt)
		pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"false"}})
		syncNow := func() {
			t.Helper()
			syncOnce(t, m, pod) // a back-off is a failed result: its events are what this test reads
		}
		syncNow() // the first instance, restart count 0
		time.Sleep(time.Second)
		rt.Exit("app", 1)
		syncNow() // restarted at once: the second instance, restart count 1
		time.Sleep(time.Second)
		rt.Exit("app", 1)
		syncNow() // backing off
		time.Sleep(time.Second)
		syncNow() // still backing off: the same BackOff again

		st, err := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
		if err != nil {
			t.Fatal(err)
		}
		dead := st.FindContainerStatusByName("app")
		if dead == nil || dead.State != kubecontainer.ContainerExited || dead.RestartCount != 1 {
			t.Fatalf("newest app instance %+v, want the second, exited, restart count 1", dead)
		}
		backOffs := events.of(schemas.EventBackOff)
		if len(backOffs) != 2 {
			t.Fatalf("%d BackOff events, want 2 (one per sync in the period)", len(backOffs))
		}
		want := dead.ID + ".1.BackOff"
		for _, ev := range backOffs {
			if ev.ID != want {
				t.Errorf("BackOff id %q, want %q (the exited instance, its restart count, BackOff)", ev.ID, want)
			}
		}
	})
}
