package images

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/rs/zerolog"
)

// BenchmarkPullAndUnpack50MiB pulls an image of one 50 MiB layer (random
// bytes: gzip cannot shrink them, so 50 MiB cross the wire) from a registry
// on loopback into an empty store and unpacks it, each iteration into a
// store of its own.
//
//	go test -run '^$' -bench PullAndUnpack50MiB -benchtime 5x ./runtime/embedded/images
func BenchmarkPullAndUnpack50MiB(b *testing.B) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	layer, err := random.Layer(50<<20, types.DockerLayer)
	if err != nil {
		b.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		b.Fatal(err)
	}
	ref := strings.TrimPrefix(srv.URL, "http://") + "/bench/big:1"
	tag, err := name.ParseReference(ref)
	if err != nil {
		b.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(50 << 20)
	b.ResetTimer()
	var total time.Duration
	for range b.N {
		b.StopTimer()
		s, err := Open(Options{Dir: b.TempDir(), Logger: zerolog.Nop()})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if _, err := s.Pull(context.Background(), ref, nil); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/pull")
}
