// Package imageref is the grammar of image references that containerd and
// kubelet parse them with (github.com/distribution/reference), and their
// normal form: what intent validation refuses before any sandbox is made,
// and what the embedded runtime stores images under.
package imageref

import (
	"fmt"
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

// Reference is a normalised reference: "docker.io/library/busybox:latest" is
// {Domain: "docker.io", Path: "library/busybox", Tag: "latest"}. Exactly one
// of Tag and Digest is set.
type Reference struct {
	Domain string
	Path   string
	Tag    string
	Digest string
}

// Repo is the reference without tag or digest, as RepoDigests start.
func (r Reference) Repo() string { return r.Domain + "/" + r.Path }

func (r Reference) String() string {
	if r.Digest != "" {
		return r.Repo() + "@" + r.Digest
	}
	return r.Repo() + ":" + r.Tag
}

// Normalize expands a reference as containerd's CRI does (distribution's
// ParseDockerRef): "busybox" → "docker.io/library/busybox:latest",
// "index.docker.io/x/y" → "docker.io/x/y:latest", "localhost:5000/a" →
// "localhost:5000/a:latest"; a reference with both a tag and a digest keeps
// only the digest, which alone names the content. A reference that is not
// valid (upper case in the repository, a 64-hex name, a bad digest) is an
// error.
func Normalize(ref string) (string, error) {
	r, err := Parse(ref)
	if err != nil {
		return "", err
	}
	return r.String(), nil
}

// Parse parses and normalises a reference, as Normalize.
func Parse(s string) (Reference, error) {
	if s == "" {
		return Reference{}, fmt.Errorf("invalid reference %q: empty", s)
	}
	if identifierRE.MatchString(s) {
		return Reference{}, fmt.Errorf("invalid reference %q: a repository name cannot be 64 hexadecimal characters", s)
	}
	domain, remainder := splitDockerDomain(s)
	remote := remainder
	if i := strings.IndexRune(remainder, ':'); i >= 0 {
		remote = remainder[:i]
	}
	if strings.ToLower(remote) != remote {
		return Reference{}, fmt.Errorf("invalid reference %q: repository name must be lowercase", s)
	}
	if !domainRE.MatchString(domain) {
		return Reference{}, fmt.Errorf("invalid reference %q: bad registry %q", s, domain)
	}
	m := referenceRE.FindStringSubmatch(domain + "/" + remainder)
	if m == nil {
		return Reference{}, fmt.Errorf("invalid reference %q: invalid reference format", s)
	}
	if len(m[1]) > maxNameLength {
		return Reference{}, fmt.Errorf("invalid reference %q: repository name longer than %d characters", s, maxNameLength)
	}
	r := Reference{Domain: domain, Path: strings.TrimPrefix(m[1], domain+"/"), Tag: m[2], Digest: m[3]}
	if r.Digest != "" {
		alg, hex, _ := strings.Cut(r.Digest, ":")
		re, ok := digestHexRE[alg]
		if !ok {
			return Reference{}, fmt.Errorf("invalid reference %q: unsupported digest algorithm %q", s, alg)
		}
		if !re.MatchString(hex) {
			return Reference{}, fmt.Errorf("invalid reference %q: invalid %s digest", s, alg)
		}
		r.Tag = "" // the digest alone names the content
	} else if r.Tag == "" {
		r.Tag = "latest"
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
