package embedded

import (
	"testing"

	"github.com/jetlet/jetlet/runtime/crilabels"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestListPodSandboxFilters(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	a, _ := h.pod("a", map[string]string{"app": "x", "tier": "1"})
	b, _ := h.pod("b", map[string]string{"app": "x"})
	c, _ := h.pod("c", map[string]string{"app": "y"})
	if _, err := h.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: c}); err != nil {
		t.Fatal(err)
	}
	ready := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	notReady := &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
	tests := []struct {
		name   string
		filter *runtimeapi.PodSandboxFilter
		want   []string
	}{
		{"all", nil, []string{a, b, c}},
		{"id", &runtimeapi.PodSandboxFilter{Id: b}, []string{b}},
		{"id prefix", &runtimeapi.PodSandboxFilter{Id: b[:20]}, []string{b}},
		{"unknown id", &runtimeapi.PodSandboxFilter{Id: "ffff"}, nil},
		{"ready", &runtimeapi.PodSandboxFilter{State: ready}, []string{a, b}},
		{"not ready", &runtimeapi.PodSandboxFilter{State: notReady}, []string{c}},
		{"label", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "x"}}, []string{a, b}},
		{"labels", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "x", "tier": "1"}}, []string{a}},
		{"label and state", &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{"app": "y"}, State: ready}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: tt.filter})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, it := range resp.GetItems() {
				got = append(got, it.GetId())
			}
			if !sameSet(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

// A list whose label selector names a pod uid (a pod's status, its
// collection) is served from the runtime's index by pod: it finds that
// pod's sandboxes and containers, after a restart too, and none once
// removed; other labels in the selector still filter.
func TestListsByPodUIDLabel(t *testing.T) {
	h := newHostProgramsHarness(t)
	ctx := ctxT(t)
	ids := map[string][2]string{}
	for _, uid := range []string{"uid-a", "uid-b"} {
		labels := map[string]string{crilabels.LabelPodUID: uid, "app": uid}
		sb, sbCfg := h.pod("p-"+uid, labels)
		c := h.create(sb, sbCfg, containerConfig("c", labels, "sleep", "1000"))
		ids[uid] = [2]string{sb, c}
	}
	check := func(uid string, selector map[string]string, want bool) {
		t.Helper()
		sbs, err := h.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: selector}})
		if err != nil {
			t.Fatal(err)
		}
		cs, err := h.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: selector}})
		if err != nil {
			t.Fatal(err)
		}
		got := len(sbs.GetItems()) == 1 && sbs.GetItems()[0].GetId() == ids[uid][0] &&
			len(cs.GetContainers()) == 1 && cs.GetContainers()[0].GetId() == ids[uid][1]
		if want && !got || !want && (len(sbs.GetItems()) != 0 || len(cs.GetContainers()) != 0) {
			t.Errorf("selector %v: sandboxes %v, containers %v; want those of %s: %v", selector, sbs.GetItems(), cs.GetContainers(), uid, want)
		}
	}
	for _, uid := range []string{"uid-a", "uid-b"} {
		check(uid, map[string]string{crilabels.LabelPodUID: uid}, true)
		check(uid, map[string]string{crilabels.LabelPodUID: uid, "app": uid}, true)
		check(uid, map[string]string{crilabels.LabelPodUID: uid, "app": "other"}, false)
	}
	check("uid-c", map[string]string{crilabels.LabelPodUID: "uid-c"}, false)
	h.restart()
	check("uid-a", map[string]string{crilabels.LabelPodUID: "uid-a"}, true)
	if _, err := h.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: ids["uid-a"][1]}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: ids["uid-a"][0]}); err != nil {
		t.Fatal(err)
	}
	check("uid-a", map[string]string{crilabels.LabelPodUID: "uid-a"}, false)
	check("uid-b", map[string]string{crilabels.LabelPodUID: "uid-b"}, true)
}
