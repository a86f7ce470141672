// Package registry is the image registry on the bus: the layout of the
// object store jetlet_images (docs/contract.md section 13; docs/wire-protocol.md
// section 13), Push, which stores an image there, and the read-only OCI
// distribution API each node serves from it on a loopback address, so that
// containerd and the embedded runtime pull with no registry
// (Server; docs/containerd.md says how containerd is pointed at it).
//
// Blobs are read with batched direct gets, a window at a time, never a whole
// layer: a node serves them without consumers of its own and from any
// replica of the store.
package registry

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/nats-io/nats.go/jetstream"
)

// The three kinds of object the store holds, by the prefix of their names.
const (
	// BlobPrefix names a blob, "blobs/sha256:<hex>": a layer, a config or a
	// manifest, its content as it is, stored once however many images share
	// it. Its metadata "mediaType" says what it is (a manifest is served by
	// that type).
	BlobPrefix = "blobs/"
	// RefPrefix names a reference, "refs/<normalised reference>" (as
	// containerd normalises it: "refs/docker.io/library/busybox:1.36"). It
	// has no content: its metadata is the descriptor of the manifest the
	// reference names ("digest", "mediaType", "size") and "imageSize", the
	// bytes of the manifest, the config and the layers.
	RefPrefix = "refs/"
	// RepositoryPrefix names a repository that holds a reference,
	// "repositories/docker.io/library/busybox", with no content: a
	// registry's answer to a missing tag depends on it (MANIFEST_UNKNOWN in
	// a known repository, NAME_UNKNOWN otherwise).
	RepositoryPrefix = "repositories/"
)

// The metadata keys of blobs and references.
const (
	metaMediaType = "mediaType"
	metaDigest    = "digest"
	metaSize      = "size"
	metaImageSize = "imageSize"
)

// BlobObject is the name of the object holding the blob of digest.
func BlobObject(digest v1.Hash) string { return BlobPrefix + digest.String() }

// RefObject is the name of the object of a normalised reference.
func RefObject(ref string) string { return RefPrefix + ref }

// RepositoryObject is the name of the object of a repository
// ("docker.io/library/busybox").
func RepositoryObject(repo string) string { return RepositoryPrefix + repo }

// Image is one reference the store holds, as `jetlet image ls` lists it.
type Image struct {
	// Ref is the normalised reference.
	Ref string `json:"ref"`
	// Digest and MediaType are the manifest's.
	Digest    string `json:"digest"`
	MediaType string `json:"mediaType"`
	// ManifestSize is the manifest's bytes (its descriptor's size).
	ManifestSize int64 `json:"manifestSize"`
	// Size is the bytes a pull moves: the manifest, the config and the
	// layers.
	Size int64 `json:"size"`
	// Pushed is when the reference was last stored.
	Pushed time.Time `json:"pushed"`
}

// refMetadata is the metadata of a reference's object.
func (im Image) refMetadata() map[string]string {
	return map[string]string{
		metaDigest:    im.Digest,
		metaMediaType: im.MediaType,
		metaSize:      strconv.FormatInt(im.ManifestSize, 10),
		metaImageSize: strconv.FormatInt(im.Size, 10),
	}
}

// ImageFromObject reads a reference out of an object's info; ok is false
// for an object that is no reference (a blob, a repository), a deleted one,
// or one whose metadata does not parse.
func ImageFromObject(info *jetstream.ObjectInfo) (im Image, ok bool) {
	ref, isRef := strings.CutPrefix(info.Name, RefPrefix)
	if !isRef || info.Deleted {
		return Image{}, false
	}
	md := info.Metadata
	digest, err := v1.NewHash(md[metaDigest])
	if err != nil {
		return Image{}, false
	}
	size, err1 := strconv.ParseInt(md[metaSize], 10, 64)
	imageSize, err2 := strconv.ParseInt(md[metaImageSize], 10, 64)
	if err1 != nil || err2 != nil || md[metaMediaType] == "" {
		return Image{}, false
	}
	return Image{Ref: ref, Digest: digest.String(), MediaType: md[metaMediaType], ManifestSize: size, Size: imageSize, Pushed: info.ModTime}, true
}

// ImageFromMetaMessage reads a reference out of a message of the store's
// meta subjects ($O.<bucket>.M.>, what a reader of the stream receives),
// stored at stored; ok as ImageFromObject's.
func ImageFromMetaMessage(data []byte, stored time.Time) (Image, bool) {
	var info jetstream.ObjectInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return Image{}, false
	}
	info.ModTime = stored
	return ImageFromObject(&info)
}

// objectDigest is how the object store spells the digest of content whose
// OCI digest is d (sha256 only, as the store hashes).
func objectDigest(d v1.Hash) (string, error) {
	if d.Algorithm != "sha256" {
		return "", fmt.Errorf("digest %s: only sha256 is stored", d)
	}
	sum, err := hex.DecodeString(d.Hex)
	if err != nil {
		return "", fmt.Errorf("digest %s: %w", d, err)
	}
	return "SHA-256=" + base64.URLEncoding.EncodeToString(sum), nil
}

// holds reports whether info is the object of a blob of digest and size, as
// pushed: not deleted, of that size, with that content digest.
func holds(info *jetstream.ObjectInfo, digest v1.Hash, size int64) bool {
	want, err := objectDigest(digest)
	return err == nil && !info.Deleted && info.Size == uint64(size) && info.Digest == want
}

// isManifest reports whether mediaType is a manifest's or an index's: what
// may be served from /manifests/.
func isManifest(mediaType string) bool {
	mt := types.MediaType(mediaType)
	return mt.IsImage() || mt.IsIndex()
}
