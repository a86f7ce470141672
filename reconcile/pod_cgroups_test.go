package reconcile

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/test/fakecri"
)

// fakeCgroups holds the pod cgroups in memory.
type fakeCgroups struct {
	mu   sync.Mutex
	pods map[string]bool // uid: its cgroup exists
	fail error           // Ensure's answer when set
}

func (f *fakeCgroups) Parent(pod *corev1.Pod) string { return "/kubepods/pod" + string(pod.UID) }

func (f *fakeCgroups) Ensure(_ context.Context, pod *corev1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.pods[string(pod.UID)] = true
	return nil
}

func (f *fakeCgroups) RemoveGone(_ context.Context, gone func(string) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for uid := range f.pods {
		if gone(uid) {
			delete(f.pods, uid)
		}
	}
	return nil
}

func (f *fakeCgroups) has(uid string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods[uid]
}

// sandboxRecorder records the config of each sandbox and whether its pod's
// cgroup was there when the sandbox was asked for.
type sandboxRecorder struct {
	*fakecri.Runtime
	cgroups *fakeCgroups
	parents []string
	before  []bool
}

func (r *sandboxRecorder) RunPodSandbox(ctx context.Context, c *runtimeapi.PodSandboxConfig, h string) (string, error) {
	r.parents = append(r.parents, c.GetLinux().GetCgroupParent())
	r.before = append(r.before, r.cgroups.has(c.GetMetadata().GetUid()))
	return r.Runtime.RunPodSandbox(ctx, c, h)
}

func TestPodCgroupIsMadeBeforeTheSandboxAndRemovedWhenThePodIsGone(t *testing.T) {
	cg := &fakeCgroups{pods: map[string]bool{}}
	rt := &sandboxRecorder{Runtime: fakecri.New(), cgroups: cg}
	events := &eventLog{}
	m, err := New(rt, events, Config{NodeName: "n1", DataDir: t.TempDir(), PodCgroups: cg})
	if err != nil {
		t.Fatal(err)
	}
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}})
	if r := syncOnce(t, m, pod); r.Error() != nil {
		t.Fatalf("sync: %v", r.Error())
	}
	if len(rt.parents) != 1 || rt.parents[0] != "/kubepods/poduid1" || !rt.before[0] {
		t.Fatalf("sandboxes asked for with parents %v, cgroup there before each %v; want one with /kubepods/poduid1, made before", rt.parents, rt.before)
	}
	ctx := context.Background()
	gone := kubecontainer.PodStateFunc(func(string) bool { return true })
	if err := m.GarbageCollect(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if !cg.has("uid1") {
		t.Fatal("the cgroup of a pod whose sandbox is left went")
	}
	m.KillPod(ctx, pod, nil, nil)
	if err := m.GarbageCollect(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if cg.has("uid1") {
		t.Fatal("the cgroup of a pod gone, with nothing left, stays")
	}
}

func TestNoSandboxWithoutItsPodCgroup(t *testing.T) {
	cg := &fakeCgroups{pods: map[string]bool{}, fail: errors.New("systemd: start kubepods-poduid1.slice: job failed")}
	rt := &sandboxRecorder{Runtime: fakecri.New(), cgroups: cg}
	m, err := New(rt, &eventLog{}, Config{NodeName: "n1", DataDir: t.TempDir(), PodCgroups: cg})
	if err != nil {
		t.Fatal(err)
	}
	r := syncOnce(t, m, testPod(corev1.Container{Name: "app", Image: "img:1", Command: []string{"x"}}))
	if r.Error() == nil || !strings.Contains(r.Error().Error(), "job failed") {
		t.Errorf("sync: %v, want the cgroup's failure", r.Error())
	}
	if len(rt.parents) != 0 {
		t.Errorf("sandboxes asked for: %v, want none", rt.parents)
	}
}
