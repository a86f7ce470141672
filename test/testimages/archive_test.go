package testimages

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestWriteOCILayoutAsCtrExportDoes(t *testing.T) {
	busybox, layered := must(t, Busybox), must(t, Layered)
	refs := map[string]v1.Image{
		"busybox:1.36":                  busybox,
		"registry.example/team/bb:v1":   busybox,
		"ghcr.io/jetlet/layered:latest": layered,
	}
	var buf bytes.Buffer
	if err := WriteOCILayout(&buf, refs); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := WriteOCILayout(&again, refs); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Errorf("two writes of the same refs differ")
	}

	files, order := readTar(t, bytes.NewReader(buf.Bytes()))
	if order[0] != "oci-layout" || order[1] != "index.json" {
		t.Errorf("tar starts %v", order[:2])
	}
	// Each blob once: busybox's layer is shared by both images.
	blobs := 0
	for p := range files {
		if filepath.Dir(p) == "blobs/sha256" {
			blobs++
		}
	}
	if want := 2 /* manifests */ + 2 /* configs */ + 2; /* layers */ blobs != want {
		t.Errorf("%d blobs, want %d", blobs, want)
	}

	var index v1.IndexManifest
	if err := json.Unmarshal([]byte(files["index.json"].content), &index); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		tag    string
		digest v1.Hash
	}{
		"docker.io/library/busybox:1.36": {"1.36", digest(t, busybox)},
		"registry.example/team/bb:v1":    {"v1", digest(t, busybox)},
		"ghcr.io/jetlet/layered:latest":  {"latest", digest(t, layered)},
	}
	if len(index.Manifests) != len(want) {
		t.Fatalf("index.json: %d entries, want %d", len(index.Manifests), len(want))
	}
	for _, d := range index.Manifests {
		n := d.Annotations[AnnotationImageName]
		w, ok := want[n]
		if !ok || d.Annotations[AnnotationRefName] != w.tag || d.Digest != w.digest {
			t.Errorf("index.json entry %s %v", d.Digest, d.Annotations)
		}
	}

	// ggcr's own layout reader reads it back: the same images.
	dir := t.TempDir()
	for p, f := range files {
		if f.hdr.Typeflag != '0' {
			continue
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(f.content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	img, err := p.Image(digest(t, layered))
	if err != nil {
		t.Fatal(err)
	}
	if err := readAllLayers(img); err != nil {
		t.Fatal(err)
	}
}

func TestWriteDockerArchiveAsDockerSaveDoes(t *testing.T) {
	busybox := must(t, Busybox)
	var buf bytes.Buffer
	if err := WriteDockerArchive(&buf, map[string]v1.Image{"busybox:1.36": busybox, "testimages/nonroot:latest": must(t, NonRoot)}); err != nil {
		t.Fatal(err)
	}
	files, _ := readTar(t, bytes.NewReader(buf.Bytes()))
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal([]byte(files["manifest.json"].content), &manifest); err != nil {
		t.Fatalf("manifest.json: %v", err)
	}
	if len(manifest) != 2 {
		t.Fatalf("manifest.json: %+v", manifest)
	}
	tag, err := name.NewTag("busybox:1.36")
	if err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	img, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, &tag)
	if err != nil {
		t.Fatal(err)
	}
	got, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	want, err := busybox.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("busybox:1.36's config %s, want %s", got, want)
	}
	if err := readAllLayers(img); err != nil {
		t.Fatal(err)
	}
}
