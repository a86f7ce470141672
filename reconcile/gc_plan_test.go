package reconcile

import (
	"maps"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime/crilabels"
)

// TestPlanGC: what a collection removes of what was listed, kubelet's
// container GC, without a runtime.
func TestPlanGC(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	at := func(s int) int64 { return t0.Add(time.Duration(s) * time.Second).UnixNano() }
	const (
		running  = runtimeapi.ContainerState_CONTAINER_RUNNING
		exited   = runtimeapi.ContainerState_CONTAINER_EXITED
		ready    = runtimeapi.PodSandboxState_SANDBOX_READY
		notReady = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	)
	ctr := func(id, uid, name, sandbox string, state runtimeapi.ContainerState, created int) *runtimeapi.Container {
		return &runtimeapi.Container{Id: id, PodSandboxId: sandbox, State: state, CreatedAt: at(created), Labels: map[string]string{
			crilabels.LabelPodUID: uid, crilabels.LabelPodName: "p-" + uid, crilabels.LabelPodNamespace: "ns",
			crilabels.LabelContainerName: name,
		}}
	}
	sb := func(id, uid string, state runtimeapi.PodSandboxState, created int) *runtimeapi.PodSandbox {
		return &runtimeapi.PodSandbox{Id: id, State: state, CreatedAt: at(created),
			Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid, Name: "p-" + uid, Namespace: "ns"}}
	}
	ref := func(uid string) kubecontainer.PodRef {
		return kubecontainer.PodRef{UID: uid, Namespace: "ns", Name: "p-" + uid}
	}
	type want struct {
		containers, sandboxes []string // ids, in the plan's order
		facts, left           []string // pod uids
	}
	for _, tc := range []struct {
		name       string
		sandboxes  []*runtimeapi.PodSandbox
		containers []*runtimeapi.Container
		gone       []string
		policy     GCPolicy
		want       want
	}{
		{
			name:       "a running container and its ready sandbox stay",
			sandboxes:  []*runtimeapi.PodSandbox{sb("s1", "u1", ready, 0)},
			containers: []*runtimeapi.Container{ctr("c1", "u1", "app", "s1", running, 1)},
			policy:     GCPolicy{MaxPerPodContainer: 1},
			want:       want{left: []string{"u1"}},
		},
		{
			name:      "a wanted pod keeps its newest dead instance and loses the older ones past MaxPerPodContainer",
			sandboxes: []*runtimeapi.PodSandbox{sb("s1", "u1", ready, 0)},
			containers: []*runtimeapi.Container{
				ctr("c1", "u1", "app", "s1", exited, 10), ctr("c3", "u1", "app", "s1", exited, 30), ctr("c2", "u1", "app", "s1", exited, 20),
			},
			policy: GCPolicy{MaxPerPodContainer: 1},
			want:   want{containers: []string{"c2", "c1"}, facts: []string{"u1"}, left: []string{"u1"}},
		},
		{
			name:      "MaxPerPodContainer 2 keeps two dead instances of each container",
			sandboxes: []*runtimeapi.PodSandbox{sb("s1", "u1", ready, 0)},
			containers: []*runtimeapi.Container{
				ctr("c1", "u1", "app", "s1", exited, 10), ctr("c2", "u1", "app", "s1", exited, 20), ctr("c3", "u1", "app", "s1", exited, 30),
				ctr("d1", "u1", "side", "s1", exited, 10),
			},
			policy: GCPolicy{MaxPerPodContainer: 2},
			want:   want{containers: []string{"c1"}, facts: []string{"u1"}, left: []string{"u1"}},
		},
		{
			name:      "a negative MaxPerPodContainer keeps every dead instance",
			sandboxes: []*runtimeapi.PodSandbox{sb("s1", "u1", ready, 0)},
			containers: []*runtimeapi.Container{
				ctr("c1", "u1", "app", "s1", exited, 10), ctr("c2", "u1", "app", "s1", exited, 20), ctr("c3", "u1", "app", "s1", exited, 30),
			},
			policy: GCPolicy{MaxPerPodContainer: -1},
			want:   want{left: []string{"u1"}},
		},
		{
			name:       "a dead instance younger than MinAge stays, even of a gone pod, and so does its sandbox",
			sandboxes:  []*runtimeapi.PodSandbox{sb("s1", "u1", notReady, 0)},
			containers: []*runtimeapi.Container{ctr("c1", "u1", "app", "s1", exited, 10)},
			gone:       []string{"u1"},
			policy:     GCPolicy{MaxPerPodContainer: 1, MinAge: 2 * time.Hour},
			want:       want{left: []string{"u1"}},
		},
		{
			name:      "a gone pod loses every dead instance and every sandbox that is not ready",
			sandboxes: []*runtimeapi.PodSandbox{sb("s0", "u1", notReady, 0), sb("s1", "u1", notReady, 5)},
			containers: []*runtimeapi.Container{
				ctr("c1", "u1", "app", "s1", exited, 10), ctr("c2", "u1", "app", "s1", exited, 20), ctr("i1", "u1", "init", "s0", exited, 1),
			},
			gone:   []string{"u1"},
			policy: GCPolicy{MaxPerPodContainer: 1},
			want:   want{containers: []string{"c2", "c1", "i1"}, sandboxes: []string{"s1", "s0"}, facts: []string{"u1"}},
		},
		{
			name:       "a gone pod's running container keeps its sandbox",
			sandboxes:  []*runtimeapi.PodSandbox{sb("s0", "u1", notReady, 0), sb("s1", "u1", notReady, 5)},
			containers: []*runtimeapi.Container{ctr("c0", "u1", "app", "s0", exited, 1), ctr("c1", "u1", "app", "s1", running, 10)},
			gone:       []string{"u1"},
			policy:     GCPolicy{MaxPerPodContainer: 1},
			want:       want{containers: []string{"c0"}, sandboxes: []string{"s0"}, facts: []string{"u1"}, left: []string{"u1"}},
		},
		{
			name:      "a wanted pod keeps its newest sandbox, not ready, and loses the older empty ones",
			sandboxes: []*runtimeapi.PodSandbox{sb("s1", "u1", notReady, 10), sb("s2", "u1", notReady, 20), sb("s0", "u1", notReady, 0)},
			policy:    GCPolicy{MaxPerPodContainer: 1},
			want:      want{sandboxes: []string{"s1", "s0"}, facts: []string{"u1"}, left: []string{"u1"}},
		},
		{
			name:      "an older sandbox goes with its dead instance, the newest stays with the instance kept",
			sandboxes: []*runtimeapi.PodSandbox{sb("s1", "u1", notReady, 0), sb("s2", "u1", notReady, 15)},
			containers: []*runtimeapi.Container{
				ctr("c1", "u1", "app", "s1", exited, 10), ctr("c2", "u1", "app", "s2", exited, 20),
			},
			policy: GCPolicy{MaxPerPodContainer: 1},
			want:   want{containers: []string{"c1"}, sandboxes: []string{"s1"}, facts: []string{"u1"}, left: []string{"u1"}},
		},
		{
			name:      "only the gone pod's content goes",
			sandboxes: []*runtimeapi.PodSandbox{sb("s1", "u1", notReady, 0), sb("s2", "u2", notReady, 0)},
			containers: []*runtimeapi.Container{
				ctr("c1", "u1", "app", "s1", exited, 10), ctr("c2", "u2", "app", "s2", exited, 10),
			},
			gone:   []string{"u2"},
			policy: GCPolicy{MaxPerPodContainer: 1},
			want:   want{containers: []string{"c2"}, sandboxes: []string{"s2"}, facts: []string{"u2"}, left: []string{"u1"}},
		},
		{
			name:      "what has no pod uid is not jetlet's and stays",
			sandboxes: []*runtimeapi.PodSandbox{{Id: "x", State: notReady, Metadata: &runtimeapi.PodSandboxMetadata{Name: "other"}}},
			containers: []*runtimeapi.Container{{Id: "y", PodSandboxId: "x", State: exited, Labels: map[string]string{
				crilabels.LabelContainerName: "other",
			}}},
			gone:   []string{""},
			policy: GCPolicy{MaxPerPodContainer: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gone := func(uid string) bool { return slices.Contains(tc.gone, uid) }
			plan := planGC(tc.sandboxes, tc.containers, gone, tc.policy, now)
			var containers, sandboxes []string
			for _, c := range plan.containers {
				containers = append(containers, c.Id)
			}
			for _, s := range plan.sandboxes {
				sandboxes = append(sandboxes, s.Id)
			}
			if !slices.Equal(containers, tc.want.containers) {
				t.Errorf("containers removed %v, want %v", containers, tc.want.containers)
			}
			if !slices.Equal(sandboxes, tc.want.sandboxes) {
				t.Errorf("sandboxes removed %v, want %v", sandboxes, tc.want.sandboxes)
			}
			facts := map[string]kubecontainer.PodRef{}
			for _, uid := range tc.want.facts {
				facts[uid] = ref(uid)
			}
			if !maps.Equal(plan.facts, facts) {
				t.Errorf("facts stored first of %v, want %v", plan.facts, facts)
			}
			if left := slices.Sorted(maps.Keys(plan.left)); !slices.Equal(left, tc.want.left) {
				t.Errorf("pods left %v, want %v", left, tc.want.left)
			}
		})
	}
}
