package registry_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/jetlet/jetlet/runtime/embedded/images"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// TestA50MiBLayerStreams: a layer is served from the store a window at a
// time, never held whole. The store is in memory, so that the server's heap
// holds the 50 MiB from the start and what serving it adds is measured
// alone.
func TestA50MiBLayerStreams(t *testing.T) {
	r := startRegistry(t, jetstream.MemoryStorage)
	const size = 50 << 20
	layer := newStreamedLayer(t, size, 7)
	r.push(t, "big:1", imageOf(t, layer))
	digest, _ := layer.Digest()

	before := liveHeap()
	resp := r.get(t, http.MethodGet, "/v2/library/big/blobs/"+digest.String())
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Length") != strconv.Itoa(size) || resp.Header.Get("Docker-Content-Digest") != digest.String() {
		t.Fatalf("GET the layer: %d, length %q, digest %q", resp.StatusCode, resp.Header.Get("Content-Length"), resp.Header.Get("Docker-Content-Digest"))
	}
	h := sha256.New()
	head, err := io.CopyN(h, resp.Body, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// The client reads no further for now: whatever the server holds of
	// the layer, it holds now.
	during := liveHeap()
	rest, err := io.Copy(h, resp.Body)
	if err != nil {
		t.Fatalf("after %d bytes: %v", head+rest, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); head+rest != size || got != digest.String() {
		t.Errorf("read %d bytes of %s, want %d of %s", head+rest, got, size, digest)
	}
	grown := int64(during) - int64(before)
	t.Logf("live heap %+.1f MiB with the layer in flight", float64(grown)/(1<<20))
	// Holding the layer would be 50 MiB. The window is 1 MiB, but what is
	// allocated while the collection runs counts too: the server goes on
	// filling the socket's buffers for a while (3 to 12 MiB here, where
	// nats.go's object reader, whose flow control lets up to 32 MiB ahead,
	// measured 12 to 17).
	if grown > size/2 {
		t.Errorf("the live heap grew by %.1f MiB while a 50 MiB layer was in flight: it holds the layer", float64(grown)/(1<<20))
	}
}

// liveHeap is the heap's live bytes, after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkPushAndPull50MiB pushes an image of one 50 MiB layer (a new one
// each time) and pulls the layer back through the registry, on an embedded
// nats-server with file storage; it reports each in ms and MB/s:
//
//	go test -run '^$' -bench PushAndPull -benchtime 5x ./schemas/natsjs/registry/
func BenchmarkPushAndPull50MiB(b *testing.B) {
	r := startRegistry(b, jetstream.FileStorage)
	const size = 50 << 20
	var pushing, pulling time.Duration
	for i := range b.N {
		layer := newStreamedLayer(b, size, uint64(100+i))
		img := imageOf(b, layer)
		digest, _ := layer.Digest()
		start := time.Now()
		r.push(b, "big:"+strconv.Itoa(i), img)
		pushing += time.Since(start)

		start = time.Now()
		resp := r.get(b, http.MethodGet, "/v2/library/big/blobs/"+digest.String())
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		pulling += time.Since(start)
		if err != nil || n != size {
			b.Fatalf("pull: %d bytes, %v", n, err)
		}
	}
	perOp := func(d time.Duration) time.Duration { return d / time.Duration(b.N) }
	b.ReportMetric(float64(perOp(pushing).Milliseconds()), "push-ms/op")
	b.ReportMetric(float64(perOp(pulling).Milliseconds()), "pull-ms/op")
	b.ReportMetric(size/perOp(pushing).Seconds()/1e6, "push-MB/s")
	b.ReportMetric(size/perOp(pulling).Seconds()/1e6, "pull-MB/s")
}

// BenchmarkPullAndUnpackFromTheObjectStore50MiB is what a node does with an
// image pushed over NATS: the embedded runtime's store pulls an image of one
// 50 MiB layer through the node's registry of the bus (its mirror) and
// unpacks it, each iteration into a store of its own.
//
//	go test -run '^$' -bench PullAndUnpackFromTheObjectStore -benchtime 5x ./schemas/natsjs/registry/
func BenchmarkPullAndUnpackFromTheObjectStore50MiB(b *testing.B) {
	r := startRegistry(b, jetstream.FileStorage)
	const size = 50 << 20
	layer, err := random.Layer(size, types.DockerLayer) // a tar: the store unpacks it
	if err != nil {
		b.Fatal(err)
	}
	r.push(b, "docker.io/library/big:1", imageOf(b, layer))
	b.SetBytes(size)
	b.ResetTimer()
	var pulling time.Duration
	for range b.N {
		b.StopTimer()
		s, err := images.Open(images.Options{Dir: b.TempDir(), Logger: zerolog.Nop(), Mirror: r.addr})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := s.Pull(b.Context(), "big:1", nil); err != nil {
			b.Fatal(err)
		}
		pulling += time.Since(start)
	}
	b.ReportMetric(float64(pulling.Milliseconds())/float64(b.N), "ms/pull")
}
