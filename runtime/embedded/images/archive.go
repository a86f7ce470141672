package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/jetlet/jetlet/schemas/imageref"
)

// Annotations naming an image in an OCI layout's index.json.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// maxMetadata bounds the JSON files of an archive read into memory
// (index, manifests, configs).
const maxMetadata = 16 << 20

// Archived is an image read from an archive.
type Archived struct {
	// Refs are the image's names in the archive, normalised; empty when it
	// has none.
	Refs []string
	// Image reads the image from the archive.
	Image v1.Image
}

// ReadArchive reads an OCI image-layout tar (index.json, nested indexes
// resolved to linux/GOARCH) or a `docker save` tar (manifest.json; used
// when there is no index.json, as containerd's import does). Names come
// from the io.containerd.image.name or org.opencontainers.image.ref.name
// annotations (the latter when it is a reference, not a bare tag) or from
// RepoTags. Archive files of an OCI layout are checked against their
// digests as they are read.
//
// The archive is spooled to an unlinked file under os.TempDir (r is read
// once, and may be a pipe); the images read from that file, which is freed
// once they are garbage collected.
func ReadArchive(r io.Reader) ([]Archived, error) {
	a, err := readArchive(context.Background(), r, os.TempDir())
	if err != nil {
		return nil, err
	}
	out := make([]Archived, len(a.images))
	for i, im := range a.images {
		out[i] = im.Archived
	}
	return out, nil
}

// archive is a tar's regular files, spooled into f, by clean name. It is
// not changed once readArchive returns: its images read it from any
// goroutine (f only through ReadAt).
type archive struct {
	f       *os.File
	files   map[string]fileSpan
	links   map[string]string // symlinks and hard links: name → target name
	images  []archivedImage
	spooled int64
}

type fileSpan struct{ off, size int64 }

type archivedImage struct {
	Archived
	// digest is the manifest's (or the named index's) digest when the
	// archive records it (an OCI layout); zero for `docker save`.
	digest v1.Hash
	// size is the image's config and layers as the archive holds them.
	size uint64
}

func (a *archive) Close() error { return a.f.Close() }

// readArchive spools r into an unlinked file in dir and finds its images.
func readArchive(ctx context.Context, r io.Reader, dir string) (*archive, error) {
	f, err := os.CreateTemp(dir, ".import-*")
	if err != nil {
		return nil, fmt.Errorf("read archive: %w", err)
	}
	// Unlinked at once: a crash leaves nothing, and the data lives as long
	// as the file is open.
	os.Remove(f.Name())
	a := &archive{f: f, files: make(map[string]fileSpan), links: make(map[string]string)}
	if err := a.spool(&ctxReader{ctx: ctx, r: r}); err != nil {
		f.Close()
		return nil, fmt.Errorf("read archive: %w", err)
	}
	if _, ok := a.files["index.json"]; ok {
		err = a.readOCI()
	} else if _, ok := a.files["manifest.json"]; ok {
		err = a.readDocker()
	} else {
		err = errors.New("neither index.json (OCI image layout) nor manifest.json (docker save)")
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read archive: %w", err)
	}
	return a, nil
}

func (a *archive) spool(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := archivePath(hdr.Name)
		switch hdr.Typeflag {
		case tar.TypeReg:
			n, err := io.Copy(a.f, tr)
			if err != nil {
				return fmt.Errorf("%s: %w", hdr.Name, err)
			}
			a.files[name] = fileSpan{off: a.spooled, size: n}
			delete(a.links, name)
			a.spooled += n
		case tar.TypeSymlink:
			a.links[name] = path.Join(path.Dir(name), hdr.Linkname)
		case tar.TypeLink:
			a.links[name] = archivePath(hdr.Linkname)
		}
	}
}

func archivePath(name string) string {
	return strings.TrimPrefix(path.Clean("/"+name), "/")
}

// open opens the file name, following the archive's links (docker save
// links a layer it repeats).
func (a *archive) open(name string) (*io.SectionReader, error) {
	name = archivePath(name)
	for range 16 {
		if s, ok := a.files[name]; ok {
			return io.NewSectionReader(a.f, s.off, s.size), nil
		}
		target, ok := a.links[name]
		if !ok {
			break
		}
		name = archivePath(target)
	}
	return nil, fmt.Errorf("%s: not in the archive", name)
}

func (a *archive) readSmall(name string) ([]byte, error) {
	sr, err := a.open(name)
	if err != nil {
		return nil, err
	}
	if sr.Size() > maxMetadata {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxMetadata)
	}
	return io.ReadAll(sr)
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// blob reads the small blob of descriptor d, checked against its digest.
func (a *archive) blob(d v1.Descriptor) ([]byte, error) {
	b, err := a.readSmall(blobPath(d.Digest))
	if err != nil {
		return nil, err
	}
	if got := sha256.Sum256(b); d.Digest.Algorithm != "sha256" || hex.EncodeToString(got[:]) != d.Digest.Hex {
		return nil, fmt.Errorf("blob %s: content does not match its digest", d.Digest)
	}
	return b, nil
}

// readOCI reads an OCI image layout: each manifest index.json lists is an
// image; an index it lists stands for its linux/GOARCH image.
func (a *archive) readOCI() error {
	b, err := a.readSmall("index.json")
	if err != nil {
		return err
	}
	index, err := v1.ParseIndexManifest(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("index.json: %w", err)
	}
	for _, d := range index.Manifests {
		refs, err := layoutNames(d.Annotations)
		if err != nil {
			return fmt.Errorf("index.json: %w", err)
		}
		md, err := a.resolveIndex(d, 0)
		if err != nil {
			return err
		}
		if md == nil {
			continue // not an image (an attestation, an artifact)
		}
		img, m, err := a.ociImage(*md)
		if err != nil {
			return err
		}
		a.images = append(a.images, archivedImage{Archived: Archived{Refs: refs, Image: img}, digest: d.Digest, size: manifestSize(m)})
	}
	if len(a.images) == 0 {
		return errors.New("index.json lists no image")
	}
	return nil
}

// layoutNames are the normalised names an index.json descriptor's
// annotations give.
func layoutNames(ann map[string]string) ([]string, error) {
	n := ann[annotationContainerdName]
	if n == "" && looksLikeReference(ann[annotationRefName]) {
		n = ann[annotationRefName]
	}
	if n == "" {
		return nil, nil
	}
	ref, err := imageref.Normalize(n)
	if err != nil {
		return nil, err
	}
	return []string{ref}, nil
}

// resolveIndex follows d through nested indexes to the linux/GOARCH image
// manifest; nil when d is not an image.
func (a *archive) resolveIndex(d v1.Descriptor, depth int) (*v1.Descriptor, error) {
	switch d.MediaType {
	case types.OCIManifestSchema1, types.DockerManifestSchema2:
		return &d, nil
	case types.OCIImageIndex, types.DockerManifestList:
	default:
		return nil, nil
	}
	if depth > 8 {
		return nil, fmt.Errorf("index %s: nested too deep", d.Digest)
	}
	b, err := a.blob(d)
	if err != nil {
		return nil, err
	}
	index, err := v1.ParseIndexManifest(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("index %s: %w", d.Digest, err)
	}
	for _, c := range index.Manifests {
		if c.MediaType.IsIndex() || (c.Platform != nil && c.Platform.Satisfies(platform)) {
			if md, err := a.resolveIndex(c, depth+1); err != nil || md != nil {
				return md, err
			}
		}
	}
	return nil, fmt.Errorf("index %s: no %s image", d.Digest, platform)
}

// ociImage is the image of the manifest descriptor d.
func (a *archive) ociImage(d v1.Descriptor) (v1.Image, *v1.Manifest, error) {
	raw, err := a.blob(d)
	if err != nil {
		return nil, nil, err
	}
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, fmt.Errorf("manifest %s: %w", d.Digest, err)
	}
	config, err := a.blob(m.Config)
	if err != nil {
		return nil, nil, fmt.Errorf("manifest %s: config: %w", d.Digest, err)
	}
	mt := m.MediaType
	if mt == "" {
		mt = d.MediaType
	}
	img, err := partial.CompressedToImage(&layoutImage{a: a, raw: raw, manifest: m, mediaType: mt, config: config})
	return img, m, err
}

// layoutImage is an image of an OCI layout in the archive.
type layoutImage struct {
	a         *archive
	raw       []byte
	manifest  *v1.Manifest
	mediaType types.MediaType
	config    []byte
}

func (i *layoutImage) RawConfigFile() ([]byte, error)      { return i.config, nil }
func (i *layoutImage) MediaType() (types.MediaType, error) { return i.mediaType, nil }
func (i *layoutImage) RawManifest() ([]byte, error)        { return i.raw, nil }
func (i *layoutImage) Manifest() (*v1.Manifest, error)     { return i.manifest.DeepCopy(), nil }
func (i *layoutImage) ConfigFile() (*v1.ConfigFile, error) {
	return v1.ParseConfigFile(bytes.NewReader(i.config))
}

func (i *layoutImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if h == i.manifest.Config.Digest {
		return &layoutBlob{a: i.a, desc: i.manifest.Config}, nil
	}
	for _, l := range i.manifest.Layers {
		if l.Digest == h {
			return &layoutBlob{a: i.a, desc: l}, nil
		}
	}
	return nil, fmt.Errorf("blob %s: not in the manifest", h)
}

// layoutBlob is a layer blob of an OCI layout, checked against its digest
// and size as it is read.
type layoutBlob struct {
	a    *archive
	desc v1.Descriptor
}

func (b *layoutBlob) Digest() (v1.Hash, error)            { return b.desc.Digest, nil }
func (b *layoutBlob) Size() (int64, error)                { return b.desc.Size, nil }
func (b *layoutBlob) MediaType() (types.MediaType, error) { return b.desc.MediaType, nil }

func (b *layoutBlob) Compressed() (io.ReadCloser, error) {
	sr, err := b.a.open(blobPath(b.desc.Digest))
	if err != nil {
		return nil, err
	}
	if sr.Size() != b.desc.Size {
		return nil, fmt.Errorf("blob %s: %d bytes, the manifest says %d", b.desc.Digest, sr.Size(), b.desc.Size)
	}
	if b.desc.Digest.Algorithm != "sha256" {
		return nil, fmt.Errorf("blob %s: unsupported digest", b.desc.Digest)
	}
	return io.NopCloser(&verifyingReader{r: sr, h: sha256.New(), want: b.desc.Digest.Hex}), nil
}

// verifyingReader fails at EOF when what it read does not hash to want.
type verifyingReader struct {
	r    io.Reader
	h    hash.Hash
	want string
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.want {
			return n, fmt.Errorf("blob sha256:%s: content is sha256:%s", v.want, got)
		}
	}
	return n, err
}

// readDocker reads a `docker save` archive: manifest.json lists each
// image's config, RepoTags and layer files (uncompressed tars, or
// compressed ones from other tools).
func (a *archive) readDocker() error {
	b, err := a.readSmall("manifest.json")
	if err != nil {
		return err
	}
	var m tarball.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("manifest.json: %w", err)
	}
	if len(m) == 0 {
		return errors.New("manifest.json lists no image")
	}
	for _, d := range m {
		config, err := a.readSmall(d.Config)
		if err != nil {
			return fmt.Errorf("manifest.json: config: %w", err)
		}
		cf, err := v1.ParseConfigFile(bytes.NewReader(config))
		if err != nil {
			return fmt.Errorf("config %s: %w", d.Config, err)
		}
		if len(cf.RootFS.DiffIDs) != len(d.Layers) {
			return fmt.Errorf("config %s: %d diff ids for %d layers", d.Config, len(cf.RootFS.DiffIDs), len(d.Layers))
		}
		img := &dockerImage{config: config, layers: make(map[v1.Hash]*dockerLayer)}
		// As containerd records a docker archive: its layer files as
		// they are.
		size := uint64(len(config))
		for i, l := range d.Layers {
			sr, err := a.open(l)
			if err != nil {
				return fmt.Errorf("manifest.json: layer: %w", err)
			}
			size += uint64(sr.Size())
			img.layers[cf.RootFS.DiffIDs[i]] = &dockerLayer{a: a, file: l, diffID: cf.RootFS.DiffIDs[i]}
		}
		var refs []string
		for _, t := range d.RepoTags {
			n, err := imageref.Normalize(t)
			if err != nil {
				return fmt.Errorf("manifest.json: %w", err)
			}
			refs = append(refs, n)
		}
		vimg, err := partial.UncompressedToImage(img)
		if err != nil {
			return err
		}
		a.images = append(a.images, archivedImage{Archived: Archived{Refs: refs, Image: vimg}, size: size})
	}
	return nil
}

// dockerImage is an image of a `docker save` archive. Its manifest is
// made when asked for (gzip layers; their digests computed then).
type dockerImage struct {
	config []byte
	layers map[v1.Hash]*dockerLayer
}

func (i *dockerImage) RawConfigFile() ([]byte, error)      { return i.config, nil }
func (i *dockerImage) MediaType() (types.MediaType, error) { return types.DockerManifestSchema2, nil }

func (i *dockerImage) LayerByDiffID(h v1.Hash) (partial.UncompressedLayer, error) {
	if l, ok := i.layers[h]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("layer %s: not in the archive", h)
}

// dockerLayer is a layer file of a `docker save` archive, known by the
// diff id the config gives it (checked when it is unpacked).
type dockerLayer struct {
	a      *archive
	file   string
	diffID v1.Hash
}

func (l *dockerLayer) DiffID() (v1.Hash, error)            { return l.diffID, nil }
func (l *dockerLayer) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }

// Uncompressed reads the layer file, decompressed when it is gzip or zstd
// (ggcr's CompressedToLayer peeks at the magic).
func (l *dockerLayer) Uncompressed() (io.ReadCloser, error) {
	raw, err := partial.CompressedToLayer(&rawBlob{l})
	if err != nil {
		return nil, err
	}
	return raw.Uncompressed()
}

// rawBlob is a layer file as it is in the archive; only its content is
// asked for.
type rawBlob struct{ l *dockerLayer }

func (b *rawBlob) Digest() (v1.Hash, error) {
	return v1.Hash{}, errors.New("the digest of a docker save layer is not known")
}

func (b *rawBlob) Size() (int64, error) {
	sr, err := b.l.a.open(b.l.file)
	if err != nil {
		return 0, err
	}
	return sr.Size(), nil
}

func (b *rawBlob) MediaType() (types.MediaType, error) { return types.DockerLayer, nil }

func (b *rawBlob) Compressed() (io.ReadCloser, error) {
	sr, err := b.l.a.open(b.l.file)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(sr), nil
}
