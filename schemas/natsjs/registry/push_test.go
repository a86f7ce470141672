package registry_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas/natsjs/registry"
)

func TestARepushStoresNothing(t *testing.T) {
	r := startRegistry(t, jetstream.FileStorage)
	img := randomImage(t, 32<<10, 2, 5)
	first := r.push(t, "app:v1", img)
	before := r.lastSeq(t)

	again := r.push(t, "app:v1", img)
	if again.Stored != 0 || again.StoredBytes != 0 || again.RefStored || again.Blobs != first.Blobs {
		t.Errorf("second push = %+v, want its %d blobs and its reference found in the store", again, first.Blobs)
	}
	if after := r.lastSeq(t); after != before {
		t.Errorf("the store's stream moved from %d to %d on a second push of the same image", before, after)
	}

	// Another tag of it stores the reference alone.
	tagged := r.push(t, "app:latest", img)
	if tagged.Stored != 0 || !tagged.RefStored {
		t.Errorf("push of another tag = %+v, want the reference alone stored", tagged)
	}
}

func TestLayersSharedByImagesAreStoredOnce(t *testing.T) {
	r := startRegistry(t, jetstream.FileStorage)
	base := newStreamedLayer(t, 300<<10, 1)
	first := r.push(t, "app:v1", imageOf(t, base, newStreamedLayer(t, 10<<10, 2)))
	if first.Stored != 4 {
		t.Fatalf("first push = %+v, want 4 blobs stored", first)
	}
	second := r.push(t, "app:v2", imageOf(t, base, newStreamedLayer(t, 10<<10, 3)))
	// The new layer, the config and the manifest; not the base.
	if second.Stored != 3 || second.StoredBytes != second.Size-300<<10 {
		t.Errorf("second push = %+v, want all but the shared layer stored", second)
	}
	base.Digest()
	d, _ := base.Digest()
	info, err := r.store.GetInfo(t.Context(), registry.BlobObject(d))
	if err != nil || info.Size != 300<<10 || info.Chunks != 3 {
		t.Errorf("the shared layer's object: %+v, %v", info, err)
	}
}

func TestPushRefusesContentThatIsNotItsDigest(t *testing.T) {
	r := startRegistry(t, jetstream.FileStorage)
	good := newStreamedLayer(t, 200<<10, 4)
	bad, err := partial.CompressedToLayer(&lyingLayer{good})
	if err != nil {
		t.Fatal(err)
	}
	_, err = registry.Push(t.Context(), r.store, "app:v1", imageOf(t, bad))
	if err == nil || !strings.Contains(err.Error(), "not the 204800 bytes the manifest says") {
		t.Fatalf("push of a layer whose content is not its digest: %v", err)
	}
	d, _ := good.Digest()
	if _, err := r.store.GetInfo(t.Context(), registry.BlobObject(d)); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("the layer's object after a refused push: %v, want none", err)
	}
	if _, err := r.store.GetInfo(t.Context(), registry.RefObject("docker.io/library/app:v1")); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("the reference after a refused push: %v, want none", err)
	}
}

func TestPushOfADigestReferenceMustNameTheImage(t *testing.T) {
	r := startRegistry(t, jetstream.FileStorage)
	img := randomImage(t, 1024, 1, 6)
	res := r.push(t, "app@"+digestOf(t, img), img)
	if res.Ref != "docker.io/library/app@"+digestOf(t, img) {
		t.Errorf("ref %s", res.Ref)
	}
	other := "sha256:" + strings.Repeat("1", 64)
	if _, err := registry.Push(t.Context(), r.store, "app@"+other, img); err == nil {
		t.Errorf("push of an image under another manifest's digest succeeded")
	}
}

// lyingLayer is a layer whose content is one byte short of what its
// digest and size say.
type lyingLayer struct{ v1.Layer }

func (l *lyingLayer) Compressed() (io.ReadCloser, error) {
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	size, _ := l.Layer.Size()
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rc, size-1), rc}, nil
}

func (l *lyingLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
