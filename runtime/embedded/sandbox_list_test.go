package embedded

import (
	"testing"

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
