// Package credentials holds the node's registry credentials: Docker's
// config.json format, matched to an image the way kubelet's credentialprovider
// keyring matches them, turned into the CRI's AuthConfig for PullImage. It is
// pure logic (plus reading one file) and knows no pod: reconcile asks it
// through a role interface of its own.
//
// Credentials are secrets: nothing here logs or formats one, and errors name
// the file and the registry key, never a value.
package credentials

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/schemas/imageref"
)

// Docker Hub's names. Images without a registry come from dockerHub; an
// entry under any of these names is Docker Hub's.
const (
	dockerHub        = "docker.io"
	dockerHubIndex   = "index.docker.io"
	dockerHubBackend = "registry-1.docker.io"
)

// entry is one value of config.json's "auths", as Docker writes it.
type entry struct {
	Auth          string `json:"auth"`
	Username      string `json:"username"`
	Password      string `json:"password"`
	IdentityToken string `json:"identitytoken"`
	RegistryToken string `json:"registrytoken"`
}

// config is the part of Docker's config.json that jetlet reads.
type config struct {
	Auths map[string]entry `json:"auths"`
	// Credential helpers are programs jetlet does not run; their presence is
	// reported so that an operator knows why a registry gets no credentials.
	CredsStore  string            `json:"credsStore"`
	CredHelpers map[string]string `json:"credHelpers"`
}

// Keyring maps registry keys (host[:port][/path], possibly with '*' in host
// labels) to credentials, as kubelet's BasicDockerKeyring. The zero Keyring
// holds nothing. A Keyring is immutable once parsed.
type Keyring struct {
	// index is the keys, reverse-sorted so that a longer path of the same
	// host comes before a shorter one (kubelet's order).
	index []string
	creds map[string][]*runtimeapi.AuthConfig
	// helpers are the credential helpers config.json names (not run).
	helpers []string
}

// Parse reads Docker's config.json format. An entry whose auth field is not
// base64 of user:password is an error naming its key.
func Parse(data []byte) (*Keyring, error) {
	var c config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("not Docker's config.json format: %w", syntaxOnly(err))
	}
	k := &Keyring{creds: map[string][]*runtimeapi.AuthConfig{}}
	if c.CredsStore != "" {
		k.helpers = append(k.helpers, "credsStore")
	}
	for _, reg := range sortedKeys(c.CredHelpers) {
		k.helpers = append(k.helpers, "credHelpers["+reg+"]")
	}
	for _, loc := range sortedKeys(c.Auths) {
		auth, err := c.Auths[loc].authConfig()
		if err != nil {
			return nil, fmt.Errorf("auths[%s]: %w", loc, err)
		}
		key, err := registryKey(loc)
		if err != nil {
			return nil, fmt.Errorf("auths[%s]: %w", loc, err)
		}
		if _, ok := k.creds[key]; !ok {
			k.index = append(k.index, key)
		}
		k.creds[key] = append(k.creds[key], auth)
	}
	slices.Sort(k.index)
	slices.Reverse(k.index)
	return k, nil
}

// syntaxOnly keeps what a JSON error says about where the document is wrong,
// and drops anything that could quote a value of it.
func syntaxOnly(err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Errorf("invalid JSON at byte %d", syn.Offset)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return fmt.Errorf("%s must be a %s", typ.Field, typ.Type)
	}
	return errors.New("invalid JSON")
}

// authConfig turns a config.json entry into the CRI's AuthConfig: auth is
// decoded into username and password, as kubelet's DockerConfigEntry does.
// ServerAddress stays empty, as kubelet leaves it: containerd withholds
// credentials whose server address is not the very host it dials, which a
// wildcard or a Docker Hub alias never is.
func (e entry) authConfig() (*runtimeapi.AuthConfig, error) {
	a := &runtimeapi.AuthConfig{
		Username:      e.Username,
		Password:      e.Password,
		IdentityToken: e.IdentityToken,
		RegistryToken: e.RegistryToken,
	}
	if e.Auth != "" {
		raw, err := base64.StdEncoding.DecodeString(e.Auth)
		if err != nil {
			return nil, errors.New("auth is not base64")
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return nil, errors.New("auth is not base64 of user:password")
		}
		a.Username, a.Password = user, pass
	}
	if a.Username == "" && a.IdentityToken == "" && a.RegistryToken == "" {
		return nil, errors.New("none of auth, username, identitytoken and registrytoken is set")
	}
	return a, nil
}

// registryKey is kubelet's key for a config.json location: scheme dropped,
// host (with port) plus path, "/v1/" and "/v2/" meaning the host itself. Docker
// Hub's names all become docker.io.
func registryKey(loc string) (string, error) {
	u, err := parseSchemeless(loc)
	if err != nil || u.Host == "" {
		return "", errors.New("not a registry host[:port][/path]")
	}
	p := u.Path
	if strings.HasPrefix(p, "/v2/") || strings.HasPrefix(p, "/v1/") {
		p = p[3:]
	}
	host := u.Host
	switch host {
	case dockerHubIndex, dockerHubBackend:
		host = dockerHub
	}
	if p == "" || p == "/" {
		return host, nil
	}
	return host + p, nil
}

// parseSchemeless parses host[:port][/path], with or without a scheme.
func parseSchemeless(s string) (*url.URL, error) {
	if !strings.HasPrefix(s, "https://") && !strings.HasPrefix(s, "http://") {
		s = "https://" + s
	}
	return url.Parse(s)
}

// Lookup returns the credentials for image, in the order to try them: every
// key that matches, the most specific path of a host first. None: pull
// without credentials.
func (k *Keyring) Lookup(image string) []*runtimeapi.AuthConfig {
	if k == nil || len(k.index) == 0 {
		return nil
	}
	// The image's repository as kubelet's lookup sees it (its reference
	// normalised: docker.io/library/..., Docker Hub's index host as docker.io).
	// A reference that does not parse is pulled by nobody: no credentials.
	ref, err := imageref.Parse(image)
	if err != nil {
		return nil
	}
	repo, err := parseSchemeless(ref.Repo())
	if err != nil {
		return nil
	}
	var out []*runtimeapi.AuthConfig
	for _, key := range k.index {
		glob, err := parseSchemeless(key)
		if err == nil && urlsMatch(glob, repo) {
			out = append(out, k.creds[key]...)
		}
	}
	return out
}

// CredentialHelpers names the credential helpers the file configures, which
// jetlet does not run ("credsStore", "credHelpers[<registry>]").
func (k *Keyring) CredentialHelpers() []string { return k.helpers }

// Len is the number of registry keys.
func (k *Keyring) Len() int { return len(k.index) }

// urlsMatch is kubelet's URLsMatch: the same port, the same number of host
// labels each matching its glob (filepath.Match, so "*.example.com"), and the
// key's path a prefix of the image's.
func urlsMatch(glob, target *url.URL) bool {
	globParts, globPort := splitHost(glob)
	targetParts, targetPort := splitHost(target)
	if globPort != targetPort || len(globParts) != len(targetParts) || !strings.HasPrefix(target.Path, glob.Path) {
		return false
	}
	for i, g := range globParts {
		if ok, err := filepath.Match(g, targetParts[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHost(u *url.URL) (labels []string, port string) {
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Host, ""
	}
	return strings.Split(host, "."), port
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
