package embedded

import (
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protoapi "google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// listCodec is the CRI server's codec: gRPC's proto codec, except that the
// responses of ListContainers and ListPodSandbox are put together from each
// item's encoding, kept from one list to the next. A relist asks for both
// every second, and encoding 2,000 containers' labels and annotations each
// time was most of its cost; an item's fields other than its state never
// change, so its encoding is kept while its state stays the same.
type listCodec struct {
	encoding.CodecV2

	mu         sync.Mutex
	containers map[string]encodedItem // by container id
	sandboxes  map[string]encodedItem // by sandbox id
}

// encodedItem is the encoding of a list item in the state it had.
type encodedItem struct {
	state int32
	data  []byte
}

func newListCodec() *listCodec {
	return &listCodec{
		CodecV2:    encoding.GetCodecV2(proto.Name),
		containers: map[string]encodedItem{},
		sandboxes:  map[string]encodedItem{},
	}
}

// Marshal encodes v as the proto codec does.
func (c *listCodec) Marshal(v any) (mem.BufferSlice, error) {
	var items [][]byte // the list's items' encodings, in order
	var err error
	switch m := v.(type) {
	case *runtimeapi.ListContainersResponse:
		items = make([][]byte, len(m.Containers))
		for i, it := range m.Containers {
			if items[i], err = c.encoded(c.containers, it.Id, int32(it.State), it); err != nil {
				return nil, err
			}
		}
	case *runtimeapi.ListPodSandboxResponse:
		items = make([][]byte, len(m.Items))
		for i, it := range m.Items {
			if items[i], err = c.encoded(c.sandboxes, it.Id, int32(it.State), it); err != nil {
				return nil, err
			}
		}
	default:
		return c.CodecV2.Marshal(v)
	}
	// Each item is field 1 of its list, the list message's only field.
	size := 0
	for _, data := range items {
		size += protowire.SizeTag(1) + protowire.SizeBytes(len(data))
	}
	out := make([]byte, 0, size)
	for _, data := range items {
		out = protowire.AppendTag(out, 1, protowire.BytesType)
		out = protowire.AppendBytes(out, data)
	}
	return mem.BufferSlice{mem.SliceBuffer(out)}, nil
}

// encoded is item's encoding, made afresh only when its id is new to items
// or its state changed.
func (c *listCodec) encoded(items map[string]encodedItem, id string, state int32, item protoapi.Message) ([]byte, error) {
	c.mu.Lock()
	enc, ok := items[id]
	c.mu.Unlock()
	if ok && enc.state == state {
		return enc.data, nil
	}
	data, err := protoapi.Marshal(item)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	items[id] = encodedItem{state: state, data: data}
	c.mu.Unlock()
	return data, nil
}

// forgetContainer drops a removed container's encoding. (A list taken just
// before the removal and encoded just after keeps it: a few hundred bytes,
// rarely.)
func (c *listCodec) forgetContainer(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.containers, id)
}

// forgetSandbox drops a removed sandbox's encoding.
func (c *listCodec) forgetSandbox(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sandboxes, id)
}
