package embedded

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestListContainersFilters(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb1, cfg1 := h.pod("one", nil)
	sb2, cfg2 := h.pod("two", nil)
	created := h.create(sb1, cfg1, containerConfig("created", map[string]string{"app": "x", "k": "1"}, "true"))
	running := h.create(sb1, cfg1, containerConfig("running", map[string]string{"app": "x"}, "sleep", "1000"))
	h.startC(running)
	exited := h.create(sb2, cfg2, containerConfig("exited", map[string]string{"app": "y"}, "true"))
	h.startC(exited)
	h.waitState(exited, runtimeapi.ContainerState_CONTAINER_EXITED)

	state := func(s runtimeapi.ContainerState) *runtimeapi.ContainerStateValue {
		return &runtimeapi.ContainerStateValue{State: s}
	}
	tests := []struct {
		name   string
		filter *runtimeapi.ContainerFilter
		want   []string
	}{
		{"all", nil, []string{created, running, exited}},
		{"id", &runtimeapi.ContainerFilter{Id: running}, []string{running}},
		{"id prefix", &runtimeapi.ContainerFilter{Id: running[:13]}, []string{running}},
		{"unknown id", &runtimeapi.ContainerFilter{Id: "ffffffff"}, nil},
		{"created", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_CREATED)}, []string{created}},
		{"running", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}, []string{running}},
		{"exited", &runtimeapi.ContainerFilter{State: state(runtimeapi.ContainerState_CONTAINER_EXITED)}, []string{exited}},
		{"sandbox", &runtimeapi.ContainerFilter{PodSandboxId: sb1}, []string{created, running}},
		{"unknown sandbox", &runtimeapi.ContainerFilter{PodSandboxId: "ffffffff"}, nil},
		{"label", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"app": "x"}}, []string{created, running}},
		{"labels", &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"app": "x", "k": "1"}}, []string{created}},
		{"sandbox and state", &runtimeapi.ContainerFilter{PodSandboxId: sb2, State: state(runtimeapi.ContainerState_CONTAINER_RUNNING)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: tt.filter})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range resp.GetContainers() {
				got = append(got, c.GetId())
				if c.GetLabels() == nil || c.GetImageRef() == "" {
					t.Errorf("container %s lacks labels or image ref: %v", c.GetId(), c)
				}
			}
			if !sameSet(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}

	// The streaming variant answers the same.
	stream, err := h.rs.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: sb1}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		resp, err := stream.Recv()
		if err != nil {
			break
		}
		for _, c := range resp.GetContainers() {
			got = append(got, c.GetId())
		}
	}
	if !sameSet(got, []string{created, running}) {
		t.Fatalf("stream got %v", got)
	}
}
