package images

import (
	"fmt"
	"net"
	"regexp"
	"strings"
)

// The reference grammar of github.com/distribution/reference (v0.6), which
// containerd's ParseDockerRef uses.
const (
	refAlphanumeric        = `[a-z0-9]+`
	refSeparator           = `(?:[._]|__|[-]+)`
	refPathComponent       = refAlphanumeric + `(?:` + refSeparator + refAlphanumeric + `)*`
	refDomainNameComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	refIPv6Address         = `\[(?:[a-fA-F0-9:]+)\]`
	refDomainName          = refDomainNameComponent + `(?:\.` + refDomainNameComponent + `)*`
	refHost                = `(?:` + refDomainName + `|` + refIPv6Address + `)`
	refDomainAndPort       = refHost + `(?::[0-9]+)?`
	refTag                 = `[\w][\w.-]{0,127}`
	refDigest              = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][[:xdigit:]]{32,}`
	refRemoteName          = refPathComponent + `(?:/` + refPathComponent + `)*`
)

var (
	referenceRE  = regexp.MustCompile(`^((?:` + refDomainAndPort + `/)?` + refRemoteName + `)(?::(` + refTag + `))?(?:@(` + refDigest + `))?$`)
	domainRE     = regexp.MustCompile(`^` + refDomainAndPort + `$`)
	identifierRE = regexp.MustCompile(`^[a-f0-9]{64}$`)
	// digestHexRE is the encoded part of the digests go-digest accepts.
	digestHexRE = map[string]*regexp.Regexp{
		"sha256": regexp.MustCompile(`^[a-f0-9]{64}$`),
		"sha384": regexp.MustCompile(`^[a-f0-9]{96}$`),
		"sha512": regexp.MustCompile(`^[a-f0-9]{128}$`),
	}
)

const maxNameLength = 255

// imageRef is a normalised reference: "docker.io/library/busybox:latest" is
// {domain: "docker.io", path: "library/busybox", tag: "latest"}. Exactly one
// of tag and digest is set.
type imageRef struct {
	domain string
	path   string
	tag    string
	digest string
}

// repo is the reference without tag or digest, as RepoDigests start.
func (r imageRef) repo() string { return r.domain + "/" + r.path }

func (r imageRef) String() string {
	if r.digest != "" {
		return r.repo() + "@" + r.digest
	}
	return r.repo() + ":" + r.tag
}

// Normalize expands a reference as containerd's CRI does (distribution's
// ParseDockerRef): "busybox" → "docker.io/library/busybox:latest",
// "index.docker.io/x/y" → "docker.io/x/y:latest", "localhost:5000/a" →
// "localhost:5000/a:latest"; a reference with both a tag and a digest keeps
// only the digest, which alone names the content. A reference that is not
// valid (upper case in the repository, a 64-hex name, a bad digest) is an
// error.
func Normalize(ref string) (string, error) {
	r, err := parseRef(ref)
	if err != nil {
		return "", err
	}
	return r.String(), nil
}

func parseRef(s string) (imageRef, error) {
	if s == "" {
		return imageRef{}, fmt.Errorf("invalid reference %q: empty", s)
	}
	if identifierRE.MatchString(s) {
		return imageRef{}, fmt.Errorf("invalid reference %q: a repository name cannot be 64 hexadecimal characters", s)
	}
	domain, remainder := splitDockerDomain(s)
	remote := remainder
	if i := strings.IndexRune(remainder, ':'); i >= 0 {
		remote = remainder[:i]
	}
	if strings.ToLower(remote) != remote {
		return imageRef{}, fmt.Errorf("invalid reference %q: repository name must be lowercase", s)
	}
	if !domainRE.MatchString(domain) {
		return imageRef{}, fmt.Errorf("invalid reference %q: bad registry %q", s, domain)
	}
	m := referenceRE.FindStringSubmatch(domain + "/" + remainder)
	if m == nil {
		return imageRef{}, fmt.Errorf("invalid reference %q: invalid reference format", s)
	}
	if len(m[1]) > maxNameLength {
		return imageRef{}, fmt.Errorf("invalid reference %q: repository name longer than %d characters", s, maxNameLength)
	}
	r := imageRef{domain: domain, path: strings.TrimPrefix(m[1], domain+"/"), tag: m[2], digest: m[3]}
	if r.digest != "" {
		alg, hex, _ := strings.Cut(r.digest, ":")
		re, ok := digestHexRE[alg]
		if !ok {
			return imageRef{}, fmt.Errorf("invalid reference %q: unsupported digest algorithm %q", s, alg)
		}
		if !re.MatchString(hex) {
			return imageRef{}, fmt.Errorf("invalid reference %q: invalid %s digest", s, alg)
		}
		r.tag = "" // the digest alone names the content
	} else if r.tag == "" {
		r.tag = "latest"
	}
	return r, nil
}

// splitDockerDomain is distribution's: the first path component is a
// registry when it is "localhost", holds a "." or ":", or has upper case;
// otherwise the registry is Docker Hub, whose single-component names live
// under "library/".
func splitDockerDomain(name string) (domain, remainder string) {
	first, rest, ok := strings.Cut(name, "/")
	switch {
	case !ok:
		domain, remainder = "docker.io", name
	case first == "localhost", strings.ContainsAny(first, ".:"), strings.ToLower(first) != first:
		domain, remainder = first, rest
	default:
		domain, remainder = "docker.io", name
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.ContainsRune(remainder, '/') {
		remainder = "library/" + remainder
	}
	return domain, remainder
}

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
