package embedded

import (
	"testing"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// roundTrip encodes msg with c and decodes it as the client does.
func roundTrip[T proto.Message](t *testing.T, c *listCodec, msg T, into T) T {
	t.Helper()
	data, err := c.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(data.Materialize(), into); err != nil {
		t.Fatal(err)
	}
	return into
}

func TestListCodecEncodesListsAsProto(t *testing.T) {
	c := newListCodec()
	containers := &runtimeapi.ListContainersResponse{}
	for _, id := range []string{"a", "b", "c"} {
		containers.Containers = append(containers.Containers, &runtimeapi.Container{
			Id: id, PodSandboxId: "s", State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 7,
			Metadata: &runtimeapi.ContainerMetadata{Name: "app-" + id, Attempt: 1},
			Labels:   map[string]string{"io.kubernetes.pod.uid": "u"}, Annotations: map[string]string{"k": "v"},
		})
	}
	sandboxes := &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{
		Id: "s", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{"l": "v"},
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Uid: "u", Namespace: "ns"},
	}}}
	for round := range 2 { // encoded, then from what was kept
		if got := roundTrip(t, c, containers, &runtimeapi.ListContainersResponse{}); !proto.Equal(got, containers) {
			t.Errorf("round %d: containers decode as %v, want %v", round, got, containers)
		}
		if got := roundTrip(t, c, sandboxes, &runtimeapi.ListPodSandboxResponse{}); !proto.Equal(got, sandboxes) {
			t.Errorf("round %d: sandboxes decode as %v, want %v", round, got, sandboxes)
		}
	}
	// A state change is seen; so is an empty list.
	containers.Containers[1].State = runtimeapi.ContainerState_CONTAINER_EXITED
	sandboxes.Items[0].State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if got := roundTrip(t, c, containers, &runtimeapi.ListContainersResponse{}); !proto.Equal(got, containers) {
		t.Errorf("after an exit: %v, want %v", got, containers)
	}
	if got := roundTrip(t, c, sandboxes, &runtimeapi.ListPodSandboxResponse{}); !proto.Equal(got, sandboxes) {
		t.Errorf("after a stop: %v, want %v", got, sandboxes)
	}
	if got := roundTrip(t, c, &runtimeapi.ListContainersResponse{}, &runtimeapi.ListContainersResponse{}); len(got.Containers) != 0 {
		t.Errorf("an empty list decodes as %v", got)
	}
	// Other messages are the proto codec's.
	status := &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: "a", ExitCode: 3}}
	if got := roundTrip(t, c, status, &runtimeapi.ContainerStatusResponse{}); !proto.Equal(got, status) {
		t.Errorf("a status decodes as %v, want %v", got, status)
	}
}

func TestListCodecForgetsRemovedItems(t *testing.T) {
	c := newListCodec()
	list := &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{Id: "a", Image: &runtimeapi.ImageSpec{Image: "one"}}}}
	roundTrip(t, c, list, &runtimeapi.ListContainersResponse{})
	c.forgetContainer("a")
	c.forgetSandbox("s")
	if len(c.containers)+len(c.sandboxes) != 0 {
		t.Errorf("%d containers and %d sandboxes kept after their removal", len(c.containers), len(c.sandboxes))
	}
	// A new container under a removed one's id (as a test's fake runtime
	// might make) is encoded afresh.
	list.Containers[0].Image.Image = "two"
	if got := roundTrip(t, c, list, &runtimeapi.ListContainersResponse{}); got.Containers[0].GetImage().GetImage() != "two" {
		t.Errorf("after a removal, the id's old encoding was used: %v", got)
	}
}
