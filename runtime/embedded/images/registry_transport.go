package images

import (
	"fmt"
	"net/http"
	"strings"
)

// registryTransport carries one pull's requests. It refuses plain HTTP to
// any host the store does not allow it (ggcr would also try it for RFC 1918
// and .local addresses), and adds ns=<registry> to the requests to the
// mirror, as containerd does, so that a mirror serving several registries
// knows which one is meant.
type registryTransport struct {
	base      http.RoundTripper
	plainHTTP func(host string) bool
	mirror    string // the mirror's host:port; "" when the pull is not from it
	ns        string // the reference's registry, for the mirror
}

func (t *registryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && !t.plainHTTP(req.URL.Host) {
		return nil, fmt.Errorf("plain HTTP to %s refused: neither a loopback address nor an insecure registry", req.URL.Host)
	}
	if t.mirror != "" && strings.EqualFold(req.URL.Host, t.mirror) {
		req = req.Clone(req.Context())
		q := req.URL.Query()
		q.Set("ns", t.ns)
		req.URL.RawQuery = q.Encode()
	}
	return t.base.RoundTrip(req)
}

// plainHTTP reports whether the registry host ("name" or "name:port") is
// reached over plain HTTP: a loopback address, or one of Options.Insecure
// (an entry without a port matches the host on any port).
func (s *Store) plainHTTP(host string) bool {
	if isLoopbackHost(host) {
		return true
	}
	host = strings.ToLower(host)
	name := strings.ToLower(hostname(host))
	for _, h := range s.insecure {
		if h == host || h == name {
			return true
		}
	}
	return false
}
