package runtime

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protoapi "google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func kubeletContainer(i int, state runtimeapi.ContainerState) *runtimeapi.Container {
	return &runtimeapi.Container{
		Id: fmt.Sprintf("c%d", i), PodSandboxId: fmt.Sprintf("s%d", i),
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: state, CreatedAt: int64(i),
		Labels:      map[string]string{"io.kubernetes.pod.uid": fmt.Sprintf("u%d", i), "io.kubernetes.container.name": "app"},
		Annotations: map[string]string{"io.kubernetes.container.restartCount": "0"},
	}
}

// unmarshalList decodes the encoding of resp into a new value of its type
// through codec.
func unmarshalList[T protoapi.Message](t testing.TB, codec *listCodec, resp T) T {
	t.Helper()
	data, err := protoapi.MarshalOptions{Deterministic: true}.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	out := resp.ProtoReflect().New().Interface().(T)
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, out); err != nil {
		t.Fatal(err)
	}
	if !protoapi.Equal(out, resp) {
		t.Fatalf("decoded %v, want %v", out, resp)
	}
	return out
}

func TestAListedItemIsDecodedAgainOnlyWhenItsEncodingChanged(t *testing.T) {
	codec := newListCodec()
	first := unmarshalList(t, codec, &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		kubeletContainer(1, runtimeapi.ContainerState_CONTAINER_RUNNING), kubeletContainer(2, runtimeapi.ContainerState_CONTAINER_RUNNING),
	}})
	second := unmarshalList(t, codec, &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		kubeletContainer(1, runtimeapi.ContainerState_CONTAINER_RUNNING), kubeletContainer(2, runtimeapi.ContainerState_CONTAINER_EXITED),
		kubeletContainer(3, runtimeapi.ContainerState_CONTAINER_CREATED),
	}})
	if second.Containers[0] != first.Containers[0] {
		t.Error("c1, unchanged, was decoded again")
	}
	if second.Containers[1] == first.Containers[1] {
		t.Error("c2, exited since, is the value decoded while it ran")
	}
	if first.Containers[1].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Error("the first list's c2 changed with the second list")
	}

	// Sandboxes alike, apart from containers with the same ids.
	sandbox := &runtimeapi.PodSandbox{Id: "c1", State: runtimeapi.PodSandboxState_SANDBOX_READY, Labels: map[string]string{"a": "b"}}
	s1 := unmarshalList(t, codec, &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{sandbox}})
	s2 := unmarshalList(t, codec, &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{sandbox}})
	if s1.Items[0] != s2.Items[0] {
		t.Error("an unchanged sandbox was decoded again")
	}
}

func TestAnItemInNoListIsForgotten(t *testing.T) {
	codec := newListCodec()
	gone := kubeletContainer(1, runtimeapi.ContainerState_CONTAINER_EXITED)
	stays := kubeletContainer(2, runtimeapi.ContainerState_CONTAINER_RUNNING)
	unmarshalList(t, codec, &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{gone, stays}})
	for range 2 * keptLists {
		unmarshalList(t, codec, &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{stays}})
	}
	if _, kept := codec.containers.byID["c1"]; kept {
		t.Errorf("c1, in none of the last %d lists, is still kept", 2*keptLists)
	}
	if _, kept := codec.containers.byID["c2"]; !kept {
		t.Error("c2, in every list, was forgotten")
	}
}

func TestAListResponseWithAnotherFieldIsDecodedWhole(t *testing.T) {
	item, err := protoapi.Marshal(kubeletContainer(1, runtimeapi.ContainerState_CONTAINER_RUNNING))
	if err != nil {
		t.Fatal(err)
	}
	data := protowire.AppendTag(nil, 1, protowire.BytesType)
	data = protowire.AppendBytes(data, item)
	data = protowire.AppendTag(data, 2, protowire.VarintType) // a field of a newer CRI
	data = protowire.AppendVarint(data, 7)
	var resp runtimeapi.ListContainersResponse
	if err := newListCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &resp); err != nil {
		t.Fatal(err)
	}
	if len(resp.Containers) != 1 || resp.Containers[0].Id != "c1" || len(resp.ProtoReflect().GetUnknown()) == 0 {
		t.Errorf("decoded %v (unknown fields %x), want c1 and the unknown field kept", &resp, resp.ProtoReflect().GetUnknown())
	}
}

func TestTheClientDecodesAnUnchangedContainerOnce(t *testing.T) {
	fake := newFakeRuntime()
	fake.on("ListContainers", func(context.Context) error { return nil })
	c := connect(t, startTestServer(t, fake), nil)
	first, err := c.ListContainers(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.ListContainers(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1 || len(second) != 1 || first[0] != second[0] {
		t.Errorf("two lists of the same container gave %p and %p, want the value of the first list again", first, second)
	}
}

// BenchmarkRelistDecode decodes a relist's ListContainersResponse of 2,000
// of kubelet's containers, two of which changed since the last list.
func BenchmarkRelistDecode(b *testing.B) {
	resp := &runtimeapi.ListContainersResponse{}
	for i := range 2000 {
		resp.Containers = append(resp.Containers, kubeletContainer(i, runtimeapi.ContainerState_CONTAINER_RUNNING))
	}
	var lists [][]byte // each with one container exited, the one before running again
	for i := range 100 {
		resp.Containers[i].State = runtimeapi.ContainerState_CONTAINER_EXITED
		data, err := protoapi.MarshalOptions{Deterministic: true}.Marshal(resp)
		if err != nil {
			b.Fatal(err)
		}
		resp.Containers[i].State = runtimeapi.ContainerState_CONTAINER_RUNNING
		lists = append(lists, data)
	}
	codec := newListCodec()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		var out runtimeapi.ListContainersResponse
		if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(lists[i%len(lists)])}, &out); err != nil {
			b.Fatal(err)
		}
	}
}
