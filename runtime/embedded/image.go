package embedded

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jetlet/jetlet/internal/atomicfile"
	"github.com/jetlet/jetlet/schemas/imageref"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// image is the host program that pulled references name (imageProgram):
// nothing is downloaded, and every reference naming the same program is the
// same image, its tags and digests together, as one image's several tags and
// registries are under containerd. The id is the sha256 of the program's
// name, so it is stable across pulls and restarts.
type image struct {
	ID          string   `json:"id"`
	RepoTags    []string `json:"repo_tags,omitempty"`
	RepoDigests []string `json:"repo_digests,omitempty"`
	// Size is what hostImageSize found at the pull; 0 in records written
	// before sizes were kept.
	Size     uint64 `json:"size,omitempty"`
	PulledAt int64  `json:"pulled_at"`
}

// unresolvedImageSize is the size reported for an image that names nothing
// on the host: one filesystem block, about what its record takes. It is not
// 0 because k8s.io/cri-client (crictl, critest, kubelet) refuses an image
// whose id or size is unset.
const unresolvedImageSize = 4096

func (im *image) cri() *runtimeapi.Image {
	size := im.Size
	if size == 0 {
		size = unresolvedImageSize
	}
	return &runtimeapi.Image{
		Id:          im.ID,
		RepoTags:    append([]string(nil), im.RepoTags...),
		RepoDigests: append([]string(nil), im.RepoDigests...),
		Size:        size,
		Spec:        &runtimeapi.ImageSpec{Image: im.ID},
	}
}

// hostImageSize is the size of the host file a container of the normalised
// reference ref most likely runs: the executable named like the
// repository's last path component ("docker.io/library/busybox:1.36" →
// busybox) in a container's default PATH, symlinks followed. An image that
// names no such file gets unresolvedImageSize.
func hostImageSize(ref string) uint64 {
	name := imageProgram(ref)
	for _, dir := range filepath.SplitList(defaultPath) {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
			return uint64(fi.Size())
		}
	}
	return unresolvedImageSize
}

// imageProgram is the host program a normalised reference names: its
// repository's last path component ("registry.k8s.io/pause:3.9" and
// "k8s.gcr.io/pause@sha256:…" → pause).
func imageProgram(ref string) string {
	name, _, _ := strings.Cut(ref, "@")
	name = name[strings.LastIndex(name, "/")+1:]
	name, _, _ = strings.Cut(name, ":")
	return name
}

// imageID is the id of the image of a normalised reference.
func imageID(ref string) string {
	sum := sha256.Sum256([]byte(imageProgram(ref)))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// references reports whether im has ref among its tags and digests.
func (im *image) references(ref string) bool {
	return slices.Contains(im.RepoTags, ref) || slices.Contains(im.RepoDigests, ref)
}

// recordPullLocked makes ref a reference of the image id, creating it at
// size, and takes ref from any other image that held it (a record of an
// earlier scheme), dropping an image left with no reference; it reports
// whether anything changed. r.mu must be held.
func (r *Runtime) recordPullLocked(ref, id string, size uint64) bool {
	changed := false
	for oid, other := range r.images {
		if oid == id || !other.references(ref) {
			continue
		}
		other.RepoTags = slices.DeleteFunc(other.RepoTags, func(s string) bool { return s == ref })
		other.RepoDigests = slices.DeleteFunc(other.RepoDigests, func(s string) bool { return s == ref })
		if len(other.RepoTags)+len(other.RepoDigests) == 0 {
			delete(r.images, oid)
		}
		changed = true
	}
	im, ok := r.images[id]
	if !ok {
		im = &image{ID: id, Size: size, PulledAt: nowNano()}
		r.images[id] = im
	}
	if im.references(ref) {
		return changed
	}
	if _, digest, ok := strings.Cut(ref, "@"); ok && digest != "" {
		im.RepoDigests = append(im.RepoDigests, ref)
	} else {
		im.RepoTags = append(im.RepoTags, ref)
	}
	return true
}

// lookupImage finds an image by id (with or without "sha256:", or a unique
// prefix of it) or by reference; r.mu must be held.
func (r *Runtime) lookupImage(ref string) *image {
	if ref == "" {
		return nil
	}
	if im, ok := r.images[ref]; ok {
		return im
	}
	if im, ok := r.images["sha256:"+ref]; ok {
		return im
	}
	if normalized, err := imageref.Normalize(ref); err == nil {
		for _, im := range r.images {
			if im.references(normalized) {
				return im
			}
		}
	}
	var found *image
	hex := strings.TrimPrefix(ref, "sha256:")
	if len(hex) >= 4 && strings.Trim(hex, "0123456789abcdef") == "" {
		for id, im := range r.images {
			if strings.HasPrefix(strings.TrimPrefix(id, "sha256:"), hex) {
				if found != nil {
					return nil
				}
				found = im
			}
		}
	}
	return found
}

func (r *Runtime) saveImagesLocked() error {
	list := make([]*image, 0, len(r.images))
	for _, im := range r.images {
		list = append(list, im)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	return atomicfile.WriteJSON(r.imagesFile(), list)
}

// loadImages reads images.json; r.mu must be held.
func (r *Runtime) loadImages() {
	var list []*image
	if err := atomicfile.ReadJSON(r.imagesFile(), &list); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.log.Warn().Err(err).Msg("skipping unreadable image records")
		}
		return
	}
	for _, im := range list {
		if im == nil || im.ID == "" {
			continue
		}
		r.images[im.ID] = im
	}
}

func nowNano() int64 { return time.Now().UnixNano() }
