package runtime

import (
	"bytes"
	"errors"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protoapi "google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// listCodec is the client's codec: gRPC's proto codec, except that an item
// of a ListContainers or ListPodSandbox response is decoded only when its
// encoding differs from the one its id had in an earlier list; otherwise
// the value decoded then is returned again. A relist asks for both every
// second, and decoding every container's labels and annotations (126,000
// allocations for 2,000 of kubelet's containers) was most of its cost; an
// item's encoding changes only with its state on the embedded runtime, and
// when it differs at all the item is decoded anew. The decoded values are
// shared between the lists that return them: callers read them and never
// change them (Client.ListContainers, Client.ListPodSandbox).
type listCodec struct {
	encoding.CodecV2

	mu         sync.Mutex // guards containers and sandboxes
	containers decodedItems[*runtimeapi.Container]
	sandboxes  decodedItems[*runtimeapi.PodSandbox]
}

func newListCodec() *listCodec {
	return &listCodec{
		CodecV2:    encoding.GetCodecV2(proto.Name),
		containers: decodedItems[*runtimeapi.Container]{byID: map[string]*decodedItem[*runtimeapi.Container]{}},
		sandboxes:  decodedItems[*runtimeapi.PodSandbox]{byID: map[string]*decodedItem[*runtimeapi.PodSandbox]{}},
	}
}

// Unmarshal decodes data into v as the proto codec does.
func (c *listCodec) Unmarshal(data mem.BufferSlice, v any) error {
	var err error
	switch m := v.(type) {
	case *runtimeapi.ListContainersResponse:
		buf := data.Materialize()
		c.mu.Lock()
		m.Containers, err = c.containers.decode(buf, func() *runtimeapi.Container { return new(runtimeapi.Container) })
		c.mu.Unlock()
	case *runtimeapi.ListPodSandboxResponse:
		buf := data.Materialize()
		c.mu.Lock()
		m.Items, err = c.sandboxes.decode(buf, func() *runtimeapi.PodSandbox { return new(runtimeapi.PodSandbox) })
		c.mu.Unlock()
	default:
		return c.CodecV2.Unmarshal(data, v)
	}
	if errors.Is(err, errNotAList) {
		return c.CodecV2.Unmarshal(data, v) // a newer runtime's field: decode it all
	}
	return err
}

// errNotAList is a response with fields besides its items (a CRI version
// newer than this client's), which the proto codec decodes instead.
var errNotAList = errors.New("a list response with other fields than its items")

// keptLists is how many lists an item not in any of them stays decoded, at
// least (they are swept every keptLists lists): a relist every second lists
// all, another list asks for one pod's, and a removed container is
// forgotten one to two minutes later.
const keptLists = 64

// decodedItems are the items of earlier lists by id.
type decodedItems[T protoapi.Message] struct {
	byID  map[string]*decodedItem[T]
	lists uint64 // lists decoded, for the last one each item was in
}

type decodedItem[T protoapi.Message] struct {
	encoding []byte
	value    T
	listed   uint64
}

// decode returns the items of a list response (field 1, repeated, each an
// item whose id is its field 1), reusing the values of items whose encoding
// is unchanged.
func (d *decodedItems[T]) decode(data []byte, newItem func() T) ([]T, error) {
	d.lists++
	var items []T
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		if num != 1 || typ != protowire.BytesType {
			return nil, errNotAList
		}
		data = data[n:]
		enc, n := protowire.ConsumeBytes(data)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		data = data[n:]
		item, err := d.item(enc, newItem)
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	if d.lists%keptLists == 0 {
		for id, it := range d.byID {
			if d.lists-it.listed >= keptLists {
				delete(d.byID, id)
			}
		}
	}
	return items, nil
}

func (d *decodedItems[T]) item(enc []byte, newItem func() T) (T, error) {
	id, err := itemID(enc)
	if err != nil {
		var zero T
		return zero, err
	}
	if it := d.byID[string(id)]; it != nil && bytes.Equal(it.encoding, enc) {
		it.listed = d.lists
		return it.value, nil
	}
	v := newItem()
	if err := protoapi.Unmarshal(enc, v); err != nil {
		return v, err
	}
	d.byID[string(id)] = &decodedItem[T]{encoding: bytes.Clone(enc), value: v, listed: d.lists}
	return v, nil
}

// itemID is the id of an encoded Container or PodSandbox: its field 1, the
// last one when repeated, as proto decodes it.
func itemID(enc []byte) ([]byte, error) {
	var id []byte
	for len(enc) > 0 {
		num, typ, n := protowire.ConsumeTag(enc)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		enc = enc[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(enc)
			if n < 0 {
				return nil, protowire.ParseError(n)
			}
			id, enc = v, enc[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, enc)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		enc = enc[n:]
	}
	return id, nil
}
