package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"maps"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas/imageref"
)

// PushResult is what Push stored.
type PushResult struct {
	Image
	// Blobs counts the image's blobs: its layers, its config and its
	// manifest.
	Blobs int
	// Stored counts the blobs written now, StoredBytes their bytes; the
	// others were in the store already, with the same digest.
	Stored      int
	StoredBytes int64
	// RefStored is false when the reference named this manifest already.
	RefStored bool
}

// Push stores img in the object store under ref (normalised as containerd
// does, imageref.Normalize): each blob as an object named by its digest, unless an
// object of that digest and size is there already, then the repository and
// the reference. A reader never sees a reference before its blobs. Each blob
// is checked against its digest as it is stored: content that does not
// match is not stored. A reference with a digest must name img's manifest.
func Push(ctx context.Context, store jetstream.ObjectStore, ref string, img v1.Image) (PushResult, error) {
	parsed, err := imageref.Parse(ref)
	if err != nil {
		return PushResult{}, fmt.Errorf("reference %q: %w", ref, err)
	}
	normalized := parsed.String()
	blobs, res, err := imageBlobs(img)
	if err != nil {
		return PushResult{}, err
	}
	res.Ref = normalized
	if at := strings.IndexByte(normalized, '@'); at >= 0 && normalized[at+1:] != res.Digest {
		return PushResult{}, fmt.Errorf("reference %s names another manifest than the image's %s", normalized, res.Digest)
	}
	for _, b := range blobs {
		stored, err := pushBlob(ctx, store, b)
		if err != nil {
			return PushResult{}, err
		}
		if stored {
			res.Stored++
			res.StoredBytes += b.size
		}
	}
	if err := ensureObject(ctx, store, RepositoryObject(parsed.Repo())); err != nil {
		return PushResult{}, err
	}
	info, err := store.GetInfo(ctx, RefObject(normalized))
	if err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return PushResult{}, fmt.Errorf("reference %s: %w", normalized, err)
	}
	if info == nil || !maps.Equal(info.Metadata, res.refMetadata()) {
		if _, err := store.Put(ctx, jetstream.ObjectMeta{Name: RefObject(normalized), Metadata: res.refMetadata()}, bytes.NewReader(nil)); err != nil {
			return PushResult{}, fmt.Errorf("store reference %s: %w", normalized, err)
		}
		res.RefStored = true
	}
	return res, nil
}

// blob is one blob of an image, to store.
type blob struct {
	what      string // for messages: "layer 2 of 3", "config", "manifest"
	digest    v1.Hash
	size      int64
	mediaType string
	open      func() (io.ReadCloser, error)
}

// imageBlobs lists img's blobs in the order they are stored (the layers,
// the config, the manifest last) and describes the image.
func imageBlobs(img v1.Image) ([]blob, PushResult, error) {
	var res PushResult
	raw, err := img.RawManifest()
	if err != nil {
		return nil, res, fmt.Errorf("manifest: %w", err)
	}
	digest, err := img.Digest()
	if err != nil {
		return nil, res, fmt.Errorf("manifest digest: %w", err)
	}
	mt, err := img.MediaType()
	if err != nil {
		return nil, res, fmt.Errorf("manifest media type: %w", err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, res, fmt.Errorf("manifest: %w", err)
	}
	var blobs []blob
	for i, l := range m.Layers {
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			return nil, res, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
		blobs = append(blobs, blob{fmt.Sprintf("layer %d of %d", i+1, len(m.Layers)), l.Digest, l.Size, string(l.MediaType), layer.Compressed})
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return nil, res, fmt.Errorf("config: %w", err)
	}
	blobs = append(blobs,
		blob{"config", m.Config.Digest, m.Config.Size, string(m.Config.MediaType), bytesOpener(config)},
		blob{"manifest", digest, int64(len(raw)), string(mt), bytesOpener(raw)})
	res.Image = Image{Digest: digest.String(), MediaType: string(mt), ManifestSize: int64(len(raw))}
	for _, b := range blobs {
		res.Size += b.size
	}
	res.Blobs = len(blobs)
	return blobs, res, nil
}

func bytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// pushBlob stores b unless the store holds it already; stored says whether
// it wrote it.
func pushBlob(ctx context.Context, store jetstream.ObjectStore, b blob) (stored bool, err error) {
	name := BlobObject(b.digest)
	if _, err := objectDigest(b.digest); err != nil {
		return false, fmt.Errorf("%s: %w", b.what, err)
	}
	info, err := store.GetInfo(ctx, name)
	switch {
	case err == nil && holds(info, b.digest, b.size):
		return false, nil
	case err != nil && !errors.Is(err, jetstream.ErrObjectNotFound):
		return false, fmt.Errorf("%s %s: %w", b.what, b.digest, err)
	}
	rc, err := b.open()
	if err != nil {
		return false, fmt.Errorf("%s %s: %w", b.what, b.digest, err)
	}
	defer rc.Close()
	content := &verifyingReader{r: rc, h: sha256.New(), want: b.digest, size: b.size}
	meta := jetstream.ObjectMeta{Name: name, Metadata: map[string]string{metaMediaType: b.mediaType}}
	if _, err := store.Put(ctx, meta, content); err != nil {
		return false, fmt.Errorf("store %s %s: %w", b.what, b.digest, err)
	}
	return true, nil
}

// ensureObject stores an object of no content unless one of that name is
// there.
func ensureObject(ctx context.Context, store jetstream.ObjectStore, name string) error {
	_, err := store.GetInfo(ctx, name)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("%s: %w", name, err)
	}
	if _, err := store.Put(ctx, jetstream.ObjectMeta{Name: name}, bytes.NewReader(nil)); err != nil {
		return fmt.Errorf("store %s: %w", name, err)
	}
	return nil
}

// verifyingReader reads a blob in full chunks (the object store makes a
// chunk of each Read) and fails its end, instead of returning io.EOF, when
// what was read is not the blob of want and size: the store then discards
// the chunks and writes no object.
type verifyingReader struct {
	r    io.Reader
	h    hash.Hash
	n    int64
	want v1.Hash
	size int64
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	n, err := io.ReadFull(v.r, p)
	v.h.Write(p[:n])
	v.n += int64(n)
	switch {
	case err == nil, errors.Is(err, io.ErrUnexpectedEOF): // n > 0: the next Read ends it
		return n, nil
	case !errors.Is(err, io.EOF):
		return n, err
	}
	if got := hex.EncodeToString(v.h.Sum(nil)); v.n != v.size || got != v.want.Hex {
		return n, fmt.Errorf("content of %s is %d bytes of digest sha256:%s, not the %d bytes the manifest says", v.want, v.n, got, v.size)
	}
	return n, io.EOF
}
