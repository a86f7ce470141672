package client

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	goruntime "runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/jetlet/jetlet/runtime/embedded/images"
)

// TODO: this file reads image archives until runtime/embedded/images is in
// the tree; then readImageArchive is images.ReadArchive (which spools and
// cleans up for itself) and archivedImage is images.Archived.

// archivedImage is an image an archive holds and the normalised
// references it names it by.
type archivedImage struct {
	Refs  []string
	Image v1.Image
}

// The annotations of an index.json entry that name its image: the full
// reference (ctr images export, docker save with the containerd store) or,
// by the OCI spec, a reference or a bare tag.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// readImageArchive reads an OCI image layout in a tar (`ctr images export`,
// `docker save` of Docker 25 and later) or a `docker save` archive
// (manifest.json) from r. It spools the archive under dir, which must
// outlive the images (their blobs are read from there).
func readImageArchive(r io.Reader, dir string) ([]archivedImage, error) {
	spool := filepath.Join(dir, "archive.tar")
	f, err := os.Create(spool)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("reading the archive: %w", err)
	}
	names, err := tarNames(spool)
	if err != nil {
		return nil, err
	}
	switch {
	case names["oci-layout"] && names["index.json"]:
		return readOCIArchive(spool, filepath.Join(dir, "layout"))
	case names["manifest.json"]:
		return readDockerArchive(spool)
	}
	return nil, errors.New("neither an OCI image layout (oci-layout, index.json) nor a docker save archive (manifest.json)")
}

// tarNames is the set of a tar's entry names, cleaned.
func tarNames(file string) (map[string]bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, fmt.Errorf("not a tar archive: %w", err)
		}
		names[path.Clean(h.Name)] = true
	}
}

// readOCIArchive extracts the layout's files (its regular files, nothing
// outside dir) and reads each entry of its index: an image, or the image of
// this platform from a nested index.
func readOCIArchive(spool, dir string) ([]archivedImage, error) {
	if err := extractTar(spool, dir); err != nil {
		return nil, err
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	index, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := index.IndexManifest()
	if err != nil {
		return nil, err
	}
	var out []archivedImage
	for _, desc := range im.Manifests {
		var img v1.Image
		switch {
		case desc.MediaType.IsImage():
			img, err = index.Image(desc.Digest)
		case desc.MediaType.IsIndex():
			img, err = platformImage(index, desc.Digest)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("index.json entry %s: %w", desc.Digest, err)
		}
		out = append(out, archivedImage{Refs: annotatedRefs(desc.Annotations), Image: img})
	}
	return out, nil
}

// platformImage is the image of this machine's platform in a nested index.
func platformImage(parent v1.ImageIndex, digest v1.Hash) (v1.Image, error) {
	index, err := parent.ImageIndex(digest)
	if err != nil {
		return nil, err
	}
	im, err := index.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, desc := range im.Manifests {
		if p := desc.Platform; desc.MediaType.IsImage() && p != nil && p.OS == goruntime.GOOS && p.Architecture == goruntime.GOARCH {
			return index.Image(desc.Digest)
		}
	}
	return nil, fmt.Errorf("no image for %s/%s in it", goruntime.GOOS, goruntime.GOARCH)
}

// annotatedRefs are the references an index.json entry names, normalised:
// a bare tag names nothing.
func annotatedRefs(annotations map[string]string) []string {
	var refs []string
	for _, key := range []string{annotationImageName, annotationRefName} {
		v := annotations[key]
		if v == "" || !strings.ContainsAny(v, "/:@") {
			continue
		}
		if ref, err := images.Normalize(v); err == nil && (len(refs) == 0 || refs[0] != ref) {
			refs = append(refs, ref)
		}
	}
	return refs
}

// extractTar writes the regular files and directories of a tar under dir;
// an entry that would land outside it is refused.
func extractTar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "/"))
		switch h.Typeflag {
		case tar.TypeDir:
			err = root.MkdirAll(name, 0o700)
		case tar.TypeReg:
			err = extractFile(root, name, tr)
		}
		if err != nil {
			return fmt.Errorf("archive entry %s: %w", h.Name, err)
		}
	}
}

func extractFile(root *os.Root, name string, r io.Reader) error {
	if d := path.Dir(name); d != "." {
		if err := root.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readDockerArchive reads each image of a docker save archive under its
// first tag (untagged, only an archive of one image can be read).
func readDockerArchive(spool string) ([]archivedImage, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(spool) }
	manifest, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, err
	}
	var out []archivedImage
	for _, desc := range manifest {
		var tag *name.Tag
		var refs []string
		for _, t := range desc.RepoTags {
			parsed, err := name.NewTag(t)
			if err != nil {
				continue
			}
			if tag == nil {
				tag = &parsed
			}
			if ref, err := images.Normalize(t); err == nil {
				refs = append(refs, ref)
			}
		}
		if tag == nil && len(manifest) > 1 {
			continue // ggcr reads an untagged image only from an archive of one
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return nil, err
		}
		out = append(out, archivedImage{Refs: refs, Image: img})
	}
	return out, nil
}
