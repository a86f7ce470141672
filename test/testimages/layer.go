package testimages

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Epoch is the modification time of every file of every layer and the
// creation time of every image: fixed, so that the same busybox makes the
// same digests.
var Epoch = time.Date(2000, time.January, 1, 0, 0, 0, 0, time.UTC)

// entry is one file of a layer. Path is relative to the root, without a
// leading or trailing slash.
type entry struct {
	Path     string
	Type     byte // tar.TypeReg, TypeDir, TypeSymlink or TypeLink
	Mode     int64
	UID, GID int
	Linkname string // the target of a symlink, or the path of a hard link's file
	Content  []byte
}

func dir(p string, mode int64) entry { return entry{Path: p, Type: tar.TypeDir, Mode: mode} }

func file(p string, mode int64, content string) entry {
	return entry{Path: p, Type: tar.TypeReg, Mode: mode, Content: []byte(content)}
}

func symlink(p, target string) entry {
	return entry{Path: p, Type: tar.TypeSymlink, Mode: 0o777, Linkname: target}
}

// hardlink is p, a hard link to target; its header gets target's mode and
// owner (layerTar).
func hardlink(p, target string) entry {
	return entry{Path: p, Type: tar.TypeLink, Linkname: target}
}

// owned returns e owned by uid:gid.
func (e entry) owned(uid, gid int) entry { e.UID, e.GID = uid, gid; return e }

// layerTar writes entries as a tar, sorted by path (so parents come before
// their children) but hard links last (each after its file), every time
// Epoch, owner names empty: the same entries make the same bytes. Each
// entry's parent directories, and each hard link's file, must be among the
// entries, and no path may appear twice.
func layerTar(entries []entry) ([]byte, error) {
	entries = slices.Clone(entries)
	// By path, so that parents come before their children; hard links
	// last, each after the file it names.
	slices.SortFunc(entries, func(a, b entry) int {
		if al, bl := a.Type == tar.TypeLink, b.Type == tar.TypeLink; al != bl {
			if al {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Path, b.Path)
	})
	// seen holds each entry written so far, by path.
	seen := make(map[string]entry, len(entries))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if e.Path == "" || strings.HasPrefix(e.Path, "/") || strings.HasSuffix(e.Path, "/") || path.Clean(e.Path) != e.Path {
			return nil, fmt.Errorf("layer entry %q: not a clean relative path", e.Path)
		}
		if hasEntry(seen, e.Path) {
			return nil, fmt.Errorf("layer entry %q: twice", e.Path)
		}
		if parent := path.Dir(e.Path); parent != "." && !hasEntry(seen, parent) {
			return nil, fmt.Errorf("layer entry %q: its directory %q is not in the layer", e.Path, parent)
		}
		if e.Type == tar.TypeLink {
			// The file's mode and owner, as tar writes a hard link:
			// containerd applies a link's header mode to the file (one
			// inode), so 0644 there made busybox itself 0644.
			f, ok := seen[e.Linkname]
			if !ok {
				return nil, fmt.Errorf("layer entry %q: a hard link to %q, which is not in the layer", e.Path, e.Linkname)
			}
			e.Mode, e.UID, e.GID = f.Mode, f.UID, f.GID
		}
		seen[e.Path] = e
		h := &tar.Header{
			Name: e.Path, Typeflag: e.Type, Mode: e.Mode, Uid: e.UID, Gid: e.GID,
			Linkname: e.Linkname, ModTime: Epoch, Format: tar.FormatPAX,
		}
		switch e.Type {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeReg:
			h.Size = int64(len(e.Content))
		case tar.TypeSymlink, tar.TypeLink:
		default:
			return nil, fmt.Errorf("layer entry %q: type %q not supported", e.Path, e.Type)
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %q: %w", e.Path, err)
		}
		if _, err := tw.Write(e.Content); err != nil {
			return nil, fmt.Errorf("layer entry %q: %w", e.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func hasEntry(m map[string]entry, p string) bool {
	_, ok := m[p]
	return ok
}

// newLayer is entries as an OCI layer, gzip-compressed without a name or
// time in the gzip header.
func newLayer(entries []entry) (v1.Layer, error) {
	raw, err := layerTar(entries)
	if err != nil {
		return nil, err
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	compressed := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(compressed)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
