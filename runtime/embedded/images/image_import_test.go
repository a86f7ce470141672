package images

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestImportOfADockerSaveArchive(t *testing.T) {
	base := layer(t, file("etc/passwd", "root:x:0:0::/root:/bin/sh\n", 0o644))
	one := testImage(t, "one", base, layer(t, file("one", "1", 0o644)))
	two := testImage(t, "two", base, layer(t, file("two", "2", 0o644)))
	var buf bytes.Buffer
	refs := map[name.Reference]v1.Image{
		name.MustParseReference("example.com/one:1"): one,
		name.MustParseReference("busybox:two"):       two,
	}
	if err := tarball.MultiRefWrite(refs, &buf); err != nil {
		t.Fatal(err)
	}
	archive := buf.Bytes()

	// ReadArchive, as `jetlet image push` uses it.
	got, err := ReadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	byRef := make(map[string]v1.Image)
	for _, a := range got {
		for _, r := range a.Refs {
			byRef[r] = a.Image
		}
	}
	for ref, want := range map[string]v1.Image{"example.com/one:1": one, "docker.io/library/busybox:two": two} {
		img, ok := byRef[ref]
		if !ok {
			t.Fatalf("ReadArchive has no %s: %v", ref, got)
		}
		if configName(t, img) != configName(t, want) {
			t.Errorf("%s: config %s, want %s", ref, configName(t, img), configName(t, want))
		}
		gotLayers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		wantLayers, err := want.Layers()
		if err != nil {
			t.Fatal(err)
		}
		for i := range wantLayers {
			if digestOf(t, gotLayers[i]) != digestOf(t, wantLayers[i]) {
				t.Errorf("%s layer %d: digest differs", ref, i)
			}
		}
	}

	s := openStore(t, Options{})
	ims, err := s.Import(t.Context(), bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if len(ims) != 2 {
		t.Fatalf("imported %d images, want 2", len(ims))
	}
	for ref, want := range map[string]v1.Image{"example.com/one:1": one, "docker.io/library/busybox:two": two} {
		im := s.Lookup(ref)
		if im == nil || im.ID != configName(t, want) {
			t.Fatalf("Lookup(%s) = %v", ref, im)
		}
		if !slices.Equal(im.RepoTags, []string{ref}) || len(im.RepoDigests) != 0 {
			t.Errorf("%s: tags %v digests %v", ref, im.RepoTags, im.RepoDigests)
		}
		// ggcr's tarball.Write stores the layers gzipped, as a registry
		// holds them.
		m, err := want.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if im.Size != manifestSize(m) {
			t.Errorf("%s: size %d, want %d", ref, im.Size, manifestSize(m))
		}
		if b, err := s.ReadFile(im, "/etc/passwd"); err != nil || len(b) == 0 {
			t.Errorf("ReadFile of %s: %q, %v", ref, b, err)
		}
	}
	if n := len(layerEntries(t, s)); n != 3 {
		t.Errorf("layers/ holds %d entries, want 3 (the base once)", n)
	}
	if entries, _ := os.ReadDir(s.dir); len(entries) != 2 {
		t.Errorf("the store holds %v, want images.json and layers/ only", entries)
	}
}

// ociLayoutTar writes the layout at dir as a tar.
func ociLayoutTar(t *testing.T, dir string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = io.Copy(tw, f)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestImportOfAnOCILayoutArchive(t *testing.T) {
	named := simpleImage(t, "named")
	mine := simpleImage(t, "mine")
	other := simpleImage(t, "other")
	unnamed := simpleImage(t, "unnamed")
	tagOnly := simpleImage(t, "tag-only")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: otherArch()}}},
		mutate.IndexAddendum{Add: mine, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(named, layout.WithAnnotations(map[string]string{annotationRefName: "example.com/named:1"})); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{annotationContainerdName: "example.com/multi:2", annotationRefName: "2"})); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(unnamed); err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(tagOnly, layout.WithAnnotations(map[string]string{annotationRefName: "latest"})); err != nil {
		t.Fatal(err)
	}
	archive := ociLayoutTar(t, dir)

	s := openStore(t, Options{})
	ims, err := s.Import(t.Context(), bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if len(ims) != 4 {
		t.Errorf("imported %d images, want 4", len(ims))
	}
	cases := []struct {
		img     v1.Image
		tags    []string
		digests []string
	}{
		{named, []string{"example.com/named:1"}, []string{"example.com/named@" + digestOf(t, named).String()}},
		{mine, []string{"example.com/multi:2"}, []string{"example.com/multi@" + digestOf(t, idx).String()}},
		{unnamed, nil, nil},
		{tagOnly, nil, nil},
	}
	for _, c := range cases {
		im := s.Lookup(configName(t, c.img))
		if im == nil {
			t.Errorf("image %s was not imported", configName(t, c.img))
			continue
		}
		if !slices.Equal(im.RepoTags, c.tags) || !slices.Equal(im.RepoDigests, c.digests) {
			t.Errorf("image %s: tags %v digests %v; want %v %v", im.ID, im.RepoTags, im.RepoDigests, c.tags, c.digests)
		}
		if b, err := s.ReadFile(im, "/etc/label"); err != nil || len(b) == 0 {
			t.Errorf("ReadFile of %s: %q, %v", im.ID, b, err)
		}
	}
	if s.Lookup(configName(t, other)) != nil {
		t.Error("the other platform's image was imported")
	}

	// ReadArchive's images are the layout's, manifests and all.
	got, err := ReadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || !slices.Equal(got[0].Refs, []string{"example.com/named:1"}) {
		t.Fatalf("ReadArchive = %v", got)
	}
	if digestOf(t, got[0].Image) != digestOf(t, named) {
		t.Error("the archived image's manifest digest differs from the original's")
	}
}

func TestImportOfABrokenArchiveFails(t *testing.T) {
	s := openStore(t, Options{})
	for name, data := range map[string][]byte{
		"not a tar":   []byte("hello"),
		"empty tar":   layerTar(t),
		"no manifest": layerTar(t, file("oci-layout", "{}", 0o644)),
		"bad index":   layerTar(t, file("index.json", "{", 0o644)),
	} {
		if _, err := s.Import(t.Context(), bytes.NewReader(data)); err == nil {
			t.Errorf("%s: imported", name)
		}
	}
	// A blob whose content does not match its digest is refused.
	img := simpleImage(t, "tampered")
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	l, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(dir, "blobs", "sha256", digestOf(t, l[0]).Hex)
	b, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(blob, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(t.Context(), bytes.NewReader(ociLayoutTar(t, dir))); err == nil {
		t.Error("a tampered layer was imported")
	}
	if len(s.List()) != 0 || len(layerEntries(t, s)) != 0 {
		t.Errorf("failed imports left %v, %v", s.List(), layerEntries(t, s))
	}
}
