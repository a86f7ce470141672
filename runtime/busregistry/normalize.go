package busregistry

import (
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// NormalizeRef spells a reference as containerd does: "busybox" is
// "docker.io/library/busybox:latest", a reference with a tag and a digest
// keeps the digest alone. References are stored and looked up in this form.
//
// TODO: this is ggcr's parser with docker.io spelled as containerd spells
// it; runtime/embedded/images.Normalize is the embedded runtime's, and this
// becomes a call to it once that package is in the tree.
func NormalizeRef(ref string) (string, error) {
	r, err := name.ParseReference(strings.TrimSpace(ref))
	if err != nil {
		return "", err
	}
	s := r.Name()
	if rest, ok := strings.CutPrefix(s, name.DefaultRegistry+"/"); ok {
		s = "docker.io/" + rest
	}
	return s, nil
}

// repositoryOf is the repository of a normalised reference:
// "docker.io/library/busybox" of "docker.io/library/busybox:1.36" and of
// "docker.io/library/busybox@sha256:…".
func repositoryOf(ref string) string {
	if at := strings.IndexByte(ref, '@'); at >= 0 {
		return ref[:at]
	}
	if colon := strings.LastIndexByte(ref, ':'); colon > strings.LastIndexByte(ref, '/') {
		return ref[:colon]
	}
	return ref
}
