package proc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/jetlet/jetlet/internal/atomicfile"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// image is a pulled reference. Nothing is downloaded: the id is the sha256 of
// the normalised reference, so it is stable across pulls and restarts.
type image struct {
	ID          string   `json:"id"`
	RepoTags    []string `json:"repo_tags,omitempty"`
	RepoDigests []string `json:"repo_digests,omitempty"`
	PulledAt    int64    `json:"pulled_at"`
}

func (im *image) cri() *runtimeapi.Image {
	return &runtimeapi.Image{
		Id:          im.ID,
		RepoTags:    append([]string(nil), im.RepoTags...),
		RepoDigests: append([]string(nil), im.RepoDigests...),
		Size:        0,
		Spec:        &runtimeapi.ImageSpec{Image: im.ID},
	}
}

// normalizeRef expands a reference the way docker and containerd do:
// "busybox" → "docker.io/library/busybox:latest".
func normalizeRef(ref string) string {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return ""
	}
	name, digest, hasDigest := strings.Cut(ref, "@")
	domain, rest, hasSlash := strings.Cut(name, "/")
	if !hasSlash || (!strings.ContainsAny(domain, ".:") && domain != "localhost") {
		domain, rest = "docker.io", name
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	last := rest[strings.LastIndex(rest, "/")+1:]
	if !hasDigest && !strings.Contains(last, ":") {
		rest += ":latest"
	}
	out := domain + "/" + rest
	if hasDigest {
		out += "@" + digest
	}
	return out
}

func imageID(normalized string) string {
	sum := sha256.Sum256([]byte(normalized))
	return "sha256:" + hex.EncodeToString(sum[:])
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
	if im, ok := r.images[imageID(normalizeRef(ref))]; ok {
		return im
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
