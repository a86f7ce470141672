package reconcile

import (
	"context"
	"errors"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/test/fakecri"
)

// failingRemove fails RemoveContainer while fail is set.
type failingRemove struct {
	Runtime
	fail bool
}

func (f *failingRemove) RemoveContainer(ctx context.Context, id string) error {
	if f.fail {
		return errors.New("device or resource busy")
	}
	return f.Runtime.RemoveContainer(ctx, id)
}

// A dead container that garbage collection could not remove keeps its
// sandbox and its pod's directories; the next collection takes them all.
func TestGarbageCollectKeepsWhatAContainerItCouldNotRemoveNeeds(t *testing.T) {
	ctx := context.Background()
	rt := &failingRemove{Runtime: fakecri.New()}
	m, _ := newTestManager(t, rt)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}})
	syncOnce(t, m, pod)
	m.KillPod(ctx, pod, nil, nil)
	logs := podLogsDir(m.cfg.LogDir, "ns", "p", "uid1")
	if _, err := os.Stat(logs); err != nil {
		t.Fatalf("the pod's log dir: %v", err)
	}
	gone := kubecontainer.PodStateFunc(func(string) bool { return true })

	rt.fail = true
	if err := m.GarbageCollect(ctx, gone); err == nil {
		t.Fatal("a collection whose removal failed reported no error")
	}
	st, _ := m.GetPodStatus(ctx, "uid1", "p", "ns")
	if len(st.ContainerStatuses) != 1 || len(st.SandboxStatuses) != 1 {
		t.Fatalf("after a failed removal: %d containers, %d sandboxes; want the container and its sandbox", len(st.ContainerStatuses), len(st.SandboxStatuses))
	}
	if _, err := os.Stat(logs); err != nil {
		t.Errorf("the pod's log dir went with its container still there: %v", err)
	}

	rt.fail = false
	if err := m.GarbageCollect(ctx, gone); err != nil {
		t.Fatal(err)
	}
	st, _ = m.GetPodStatus(ctx, "uid1", "p", "ns")
	if len(st.ContainerStatuses)+len(st.SandboxStatuses) != 0 {
		t.Errorf("after the next collection: %+v", st)
	}
	if _, err := os.Stat(logs); !os.IsNotExist(err) {
		t.Errorf("the pod's log dir after the next collection: %v", err)
	}
}
