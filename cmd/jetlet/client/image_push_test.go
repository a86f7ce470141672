package client

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas/natsjs/registry"
	"github.com/jetlet/jetlet/test/testimages"
)

// TestImagePushAndList: `jetlet image push` of an OCI layout tar and of a
// docker save tar (from standard input), each pulled back through a node's
// registry; `jetlet image ls`; a second push sends no blob.
func TestImagePushAndList(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	app := randomImage(t, 3, 1)
	ociTar := filepath.Join(dir, "app.tar")
	writeFile(t, ociTar, func(b *bytes.Buffer) error {
		return testimages.WriteOCILayout(b, map[string]v1.Image{"ghcr.io/o/app:v1": app})
	})
	busybox := randomImage(t, 2, 2)
	tag, _ := name.NewTag("busybox:1.36")
	var saved bytes.Buffer
	if err := tarball.Write(tag, busybox, &saved); err != nil {
		t.Fatal(err)
	}
	// What ggcr reads from a docker save archive: its manifest is made up
	// on reading (docker save stores none), as containerd's import does.
	savedImage, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(saved.Bytes())), nil }, &tag)
	if err != nil {
		t.Fatal(err)
	}

	res := c.run("image", "push", "ghcr.io/o/app:v1", ociTar)
	wantCode(t, res, 0)
	wantContains(t, "push", res.stdout, "pushed ghcr.io/o/app:v1 "+digest(t, app), "5 blobs, 5 stored")
	res = c.runIn(saved.String(), "image", "push", "busybox:1.36", "-")
	wantCode(t, res, 0)
	wantContains(t, "push", res.stdout, "pushed docker.io/library/busybox:1.36 "+digest(t, savedImage), "4 blobs, 4 stored")

	t.Run("a second push sends no blob", func(t *testing.T) {
		res := c.run("image", "push", "ghcr.io/o/app:v1", ociTar)
		wantCode(t, res, 0)
		wantContains(t, "push", res.stdout, "5 blobs, 0 stored (0B), 5 already in jetlet_images")
	})
	t.Run("ls", func(t *testing.T) {
		res := c.run("image", "ls")
		wantCode(t, res, 0)
		lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
		if len(lines) != 3 || !regexp.MustCompile(`^REF\s+DIGEST\s+SIZE\s+PUSHED$`).MatchString(lines[0]) ||
			!strings.HasPrefix(lines[1], "docker.io/library/busybox:1.36 ") || !strings.HasPrefix(lines[2], "ghcr.io/o/app:v1 ") ||
			!strings.Contains(lines[2], digest(t, app)) {
			t.Errorf("image ls:\n%s", res.stdout)
		}
		res = c.run("image", "ls", "-o", "json")
		wantCode(t, res, 0)
		var list struct {
			Kind  string
			Items []registry.Image
		}
		if err := json.Unmarshal([]byte(res.stdout), &list); err != nil || list.Kind != "ImageList" || len(list.Items) != 2 {
			t.Fatalf("image ls -o json: %v\n%s", err, res.stdout)
		}
		got := list.Items[1]
		if got.Ref != "ghcr.io/o/app:v1" || got.Digest != digest(t, app) || got.Size != imageSize(t, app) || got.Pushed.IsZero() {
			t.Errorf("image ls -o json: %+v, want ghcr.io/o/app:v1 of %s, %d bytes", got, digest(t, app), imageSize(t, app))
		}
	})
	t.Run("pulled through a node's registry", func(t *testing.T) {
		addr := serveRegistry(t, c)
		for ref, want := range map[string]string{"o/app:v1?ghcr.io": digest(t, app), "library/busybox:1.36?docker.io": digest(t, savedImage)} {
			path, ns, _ := strings.Cut(ref, "?")
			img, err := remote.Image(mustRef(t, addr+"/"+path), remote.WithContext(t.Context()), remote.WithTransport(testimages.MirrorTransport{NS: ns}))
			if err != nil {
				t.Fatalf("pull %s: %v", ref, err)
			}
			if got := digest(t, img); got != want {
				t.Errorf("pulled %s: %s, pushed %s", ref, got, want)
			}
			layers, err := img.Layers()
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range layers {
				rc, err := l.Compressed() // checked against its digest as it is read
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					t.Errorf("pull %s: layer: %v", ref, err)
				}
				rc.Close()
			}
		}
	})
}

func TestImagePushPicksTheImageREFNames(t *testing.T) {
	c := newCluster(t)
	dir := t.TempDir()
	a, b := randomImage(t, 1, 3), randomImage(t, 1, 4)
	archive := filepath.Join(dir, "two.tar")
	writeFile(t, archive, func(w *bytes.Buffer) error {
		return testimages.WriteOCILayout(w, map[string]v1.Image{"a:1": a, "b:1": b})
	})
	res := c.run("image", "push", "docker.io/library/b:1", archive)
	wantCode(t, res, 0)
	wantContains(t, "push", res.stdout, "pushed docker.io/library/b:1 "+digest(t, b))
	// Another name for an image of the archive, by its digest.
	res = c.run("image", "push", "registry.local/a@"+digest(t, a), archive)
	wantCode(t, res, 0)
	wantContains(t, "push", res.stdout, "pushed registry.local/a@"+digest(t, a))

	res = c.run("image", "push", "c:1", archive)
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "the archive holds 2 images (docker.io/library/a:1, docker.io/library/b:1) and none is docker.io/library/c:1")
	res = c.runIn("not a tar", "image", "push", "c:1", "-")
	wantCode(t, res, 1)
	res = c.run("image", "push", "Not/A/Ref", archive)
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, `REF "Not/A/Ref"`)
}

// serveRegistry serves c's image store as a node does, on loopback.
func serveRegistry(t *testing.T, c *cluster) string {
	t.Helper()
	srv, err := registry.Listen(registry.Config{Listen: "127.0.0.1:0", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := srv.Serve(ctx, c.js); err != nil {
			t.Errorf("registry: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	return srv.Addr()
}

func randomImage(t *testing.T, layers int64, seed int64) v1.Image {
	t.Helper()
	img, err := random.Image(20<<10, layers, random.WithSource(rand.NewSource(seed)))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func digest(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// imageSize is what a pull of img moves: manifest, config and layers.
func imageSize(t *testing.T, img v1.Image) int64 {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}

func writeFile(t *testing.T, file string, write func(*bytes.Buffer) error) {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
