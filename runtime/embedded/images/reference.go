package images

import (
	"net"
	"strings"
)

// looksLikeReference reports whether an OCI layout's
// org.opencontainers.image.ref.name names an image ("busybox:1.36",
// "example.com/a") rather than only a tag ("latest", "v1"), which has no
// repository to go with it.
func looksLikeReference(s string) bool {
	return strings.ContainsAny(s, "/:@")
}

// isLoopbackHost reports whether host ("name", "name:port", "[v6]:port")
// is localhost or a loopback address (127.0.0.0/8, ::1), which are always
// reached over plain HTTP as Docker does.
func isLoopbackHost(host string) bool {
	h := hostname(host)
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// hostname is host without its port and IPv6 brackets.
func hostname(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}
