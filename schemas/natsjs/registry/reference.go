package registry

import "strings"

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
