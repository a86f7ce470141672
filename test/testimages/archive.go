package testimages

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations of an image's entry in index.json, as `ctr images export`
// and `docker save` (with the containerd image store) write them.
const (
	// AnnotationImageName is the full, normalised reference:
	// docker.io/library/busybox:1.36.
	AnnotationImageName = "io.containerd.image.name"
	// AnnotationRefName is its tag: 1.36 (absent for a reference by digest).
	AnnotationRefName = "org.opencontainers.image.ref.name"
)

// WriteOCILayout writes refs as an OCI image layout in a tar, as `ctr images
// export` does: oci-layout, index.json with an entry for each reference
// (AnnotationImageName, AnnotationRefName; an image under two references has
// two entries), then blobs/sha256/<digest> for every manifest, config and
// layer, each once. A reference without a registry is docker.io's
// (busybox:1.36 is docker.io/library/busybox:1.36). The same refs write the
// same bytes.
func WriteOCILayout(w io.Writer, refs map[string]v1.Image) error {
	names := slices.Sorted(maps.Keys(refs))
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	blobs := map[v1.Hash]func() (io.ReadCloser, error){}
	var blobOrder []v1.Hash
	addBlob := func(h v1.Hash, open func() (io.ReadCloser, error)) {
		if _, ok := blobs[h]; !ok {
			blobs[h] = open
			blobOrder = append(blobOrder, h)
		}
	}
	for _, s := range names {
		ref, err := name.ParseReference(s)
		if err != nil {
			return fmt.Errorf("reference %q: %w", s, err)
		}
		img := refs[s]
		raw, err := img.RawManifest()
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		mt, err := img.MediaType()
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		digest, err := img.Digest()
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		annotations := map[string]string{AnnotationImageName: ContainerdName(ref)}
		if tag, ok := ref.(name.Tag); ok {
			annotations[AnnotationRefName] = tag.TagStr()
		}
		index.Manifests = append(index.Manifests, v1.Descriptor{
			MediaType: mt, Digest: digest, Size: int64(len(raw)), Annotations: annotations,
		})
		addBlob(digest, bytesOpener(raw))
		cfgName, err := img.ConfigName()
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		cfg, err := img.RawConfigFile()
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		addBlob(cfgName, bytesOpener(cfg))
		layers, err := img.Layers()
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		for _, l := range layers {
			d, err := l.Digest()
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
			addBlob(d, l.Compressed)
		}
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", indexJSON},
	}
	for _, f := range files {
		if err := writeTarFile(tw, f.name, f.data); err != nil {
			return err
		}
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: Epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
	}
	for _, h := range blobOrder {
		if err := writeBlob(tw, h, blobs[h]); err != nil {
			return err
		}
	}
	return tw.Close()
}

// WriteDockerArchive writes refs as `docker save` does (ggcr's
// tarball.MultiRefWrite: manifest.json with each image's RepoTags, its
// config and layers). References are read as WriteOCILayout reads them.
func WriteDockerArchive(w io.Writer, refs map[string]v1.Image) error {
	m := make(map[name.Reference]v1.Image, len(refs))
	for s, img := range refs {
		ref, err := name.ParseReference(s)
		if err != nil {
			return fmt.Errorf("reference %q: %w", s, err)
		}
		m[ref] = img
	}
	return tarball.MultiRefWrite(m, w)
}

// ContainerdName is ref normalised as containerd names images:
// docker.io/library/busybox:1.36 (ggcr says index.docker.io).
func ContainerdName(ref name.Reference) string {
	reg := ref.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + ref.Context().RepositoryStr() + separator(ref) + ref.Identifier()
}

// RegistryPaths is refs as a registry serves them, without their registry:
// registry.k8s.io/pause:3.9 is pause:3.9, busybox:1.36 is
// library/busybox:1.36. Two references that come to one path must be one
// image.
func RegistryPaths(refs map[string]v1.Image) (map[string]v1.Image, error) {
	paths := make(map[string]v1.Image, len(refs))
	for s, img := range refs {
		ref, err := name.ParseReference(s)
		if err != nil {
			return nil, fmt.Errorf("reference %q: %w", s, err)
		}
		p := ref.Context().RepositoryStr() + separator(ref) + ref.Identifier()
		if other, ok := paths[p]; ok {
			d1, err1 := other.Digest()
			d2, err2 := img.Digest()
			if err1 != nil || err2 != nil || d1 != d2 {
				return nil, fmt.Errorf("two images are served as %s", p)
			}
		}
		paths[p] = img
	}
	return paths, nil
}

func separator(ref name.Reference) string {
	if _, ok := ref.(name.Digest); ok {
		return "@"
	}
	return ":"
}

func bytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

func writeBlob(tw *tar.Writer, h v1.Hash, open func() (io.ReadCloser, error)) error {
	rc, err := open()
	if err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	data, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return fmt.Errorf("blob %s: %w", h, err)
	}
	return writeTarFile(tw, "blobs/"+h.Algorithm+"/"+h.Hex, data)
}

func writeTarFile(tw *tar.Writer, name string, data []byte) error {
	h := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: Epoch, Format: tar.FormatPAX}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
