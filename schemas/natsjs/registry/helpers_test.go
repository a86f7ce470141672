package registry_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	mathrand "math/rand"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/schemas/natsjs/registry"
	"github.com/jetlet/jetlet/test/natstest"
)

// testRegistry is an embedded nats-server with the images object store, as
// `jetlet run` provisions it, and a registry serving it on loopback.
type testRegistry struct {
	js    jetstream.JetStream
	store jetstream.ObjectStore
	addr  string // host:port
}

// startRegistry provisions the store on storage and serves it.
func startRegistry(t testing.TB, storage jetstream.StorageType) *testRegistry {
	t.Helper()
	_, js := natstest.Connect(t, natstest.RunServer(t))
	cfg := natsjs.StreamsConfig{Storage: storage}
	cfg.SetDefaults()
	if err := natsjs.Provision(t.Context(), js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	store, err := js.ObjectStore(t.Context(), schemas.ObjectStoreImages)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := registry.Listen(registry.Config{Listen: "127.0.0.1:0", Logger: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ctx, js); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return &testRegistry{js: js, store: store, addr: srv.Addr()}
}

// push stores img under ref and fails the test if it cannot.
func (r *testRegistry) push(t testing.TB, ref string, img v1.Image) registry.PushResult {
	t.Helper()
	res, err := registry.Push(t.Context(), r.store, ref, img)
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	return res
}

// pull reads ref (a reference at the registry, "library/busybox:1.36")
// with ggcr's client over plain HTTP, through transport if not nil.
func (r *testRegistry) pull(t testing.TB, ref string, transport http.RoundTripper) (v1.Image, error) {
	t.Helper()
	parsed, err := name.ParseReference(r.addr+"/"+ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	opts := []remote.Option{remote.WithContext(t.Context())}
	if transport != nil {
		opts = append(opts, remote.WithTransport(transport))
	}
	return remote.Image(parsed, opts...)
}

// lastSeq is the last sequence of the store's stream: what a push wrote
// moves it.
func (r *testRegistry) lastSeq(t testing.TB) uint64 {
	t.Helper()
	st, err := r.store.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st.(*jetstream.ObjectBucketStatus).StreamInfo().State.LastSeq
}

// randomImage is an image of layers random layers of size bytes each.
func randomImage(t testing.TB, size, layers int64, seed uint64) v1.Image {
	t.Helper()
	img, err := random.Image(size, layers, random.WithSource(mathrand.NewSource(int64(seed))))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// streamedLayer is a layer of size pseudo-random bytes (its compressed
// form as far as a registry knows), generated as it is read: a test holds
// none of it in memory.
type streamedLayer struct {
	seed   uint64
	size   int64
	digest v1.Hash
}

func newStreamedLayer(t testing.TB, size int64, seed uint64) v1.Layer {
	t.Helper()
	l := &streamedLayer{seed: seed, size: size}
	h := sha256.New()
	if _, err := io.Copy(h, l.content()); err != nil {
		t.Fatal(err)
	}
	l.digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(h.Sum(nil))}
	layer, err := partial.CompressedToLayer(l)
	if err != nil {
		t.Fatal(err)
	}
	return layer
}

func (l *streamedLayer) content() io.Reader {
	var seed [32]byte
	seed[0] = byte(l.seed)
	return io.LimitReader(rand.NewChaCha8(seed), l.size)
}

func (l *streamedLayer) Digest() (v1.Hash, error)             { return l.digest, nil }
func (l *streamedLayer) Size() (int64, error)                 { return l.size, nil }
func (l *streamedLayer) MediaType() (types.MediaType, error)  { return types.OCILayer, nil }
func (l *streamedLayer) Compressed() (io.ReadCloser, error)   { return io.NopCloser(l.content()), nil }
func (l *streamedLayer) DiffID() (v1.Hash, error)             { return l.digest, nil }
func (l *streamedLayer) Uncompressed() (io.ReadCloser, error) { return l.Compressed() }

// imageOf is an OCI image of layers.
func imageOf(t testing.TB, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		t.Fatal(err)
	}
	return mutate.ConfigMediaType(img, types.OCIConfigJSON)
}

func digestOf(t testing.TB, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// checkBlobs reads every blob of a pulled image (ggcr's client checks each
// against its digest as it reads it) and checks the config's digest.
func checkBlobs(t testing.TB, img v1.Image) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			t.Errorf("layer: %v", err)
		}
	}
	raw, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	name, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != name.String() {
		t.Errorf("config of %s, named %s", got, name)
	}
}
