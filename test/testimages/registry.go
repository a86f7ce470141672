package testimages

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// RegistryOption configures Handler and Serve.
type RegistryOption func(*registryOptions)

type registryOptions struct {
	user, password string
	log            *log.Logger
}

// WithBasicAuth makes the registry a private one: every request without
// user and password (HTTP basic authentication) is refused with 401 and a
// Basic challenge, as a registry with htpasswd does.
func WithBasicAuth(user, password string) RegistryOption {
	return func(o *registryOptions) { o.user, o.password = user, password }
}

// WithLog logs each request the registry serves to l (by default nothing is
// logged).
func WithLog(l *log.Logger) RegistryOption {
	return func(o *registryOptions) { o.log = l }
}

// Handler is an empty OCI distribution registry held in memory (ggcr's
// pkg/registry): anyone may push, and what is pushed is served until the
// process ends.
func Handler(opts ...RegistryOption) http.Handler {
	o := registryOptions{log: log.New(io.Discard, "", 0)}
	for _, opt := range opts {
		opt(&o)
	}
	h := registry.New(registry.Logger(o.log))
	if o.user == "" && o.password == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, password, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(o.user)) != 1 ||
			subtle.ConstantTimeCompare([]byte(password), []byte(o.password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="testimages"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Push pushes images to the registry at host (host:port; plain HTTP when it
// is a loopback address or localhost, as ggcr decides) under their paths,
// given without a registry ("library/busybox:1.36"): RegistryPaths makes
// them from full references. opts are ggcr's (remote.WithAuth, ...).
func Push(ctx context.Context, host string, images map[string]v1.Image, opts ...remote.Option) error {
	m := make(map[name.Reference]remote.Taggable, len(images))
	for p, img := range images {
		ref, err := name.ParseReference(host + "/" + p)
		if err != nil {
			return fmt.Errorf("path %q: %w", p, err)
		}
		if ref.Context().RegistryStr() != host {
			return fmt.Errorf("path %q: give it without its registry", p)
		}
		m[ref] = img
	}
	if err := remote.MultiWrite(m, append([]remote.Option{remote.WithContext(ctx)}, opts...)...); err != nil {
		return fmt.Errorf("push to %s: %w", host, err)
	}
	return nil
}

// Serve starts a registry (Handler with opts) on 127.0.0.1 at a free port,
// pushes images to it (paths without a registry, "library/busybox:1.36"),
// and returns its host:port; t's cleanup stops it. Pull with
// <host>/library/busybox:1.36, over plain HTTP.
func Serve(t testing.TB, images map[string]v1.Image, opts ...RegistryOption) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testimages: registry: %v", err)
	}
	srv := &http.Server{Handler: Handler(opts...), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("testimages: registry: %v", err)
		}
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
	host := ln.Addr().String()
	o := registryOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	var push []remote.Option
	if o.user != "" || o.password != "" {
		push = append(push, remote.WithAuth(&authn.Basic{Username: o.user, Password: o.password}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Push(ctx, host, images, push...); err != nil {
		t.Fatalf("testimages: %v", err)
	}
	return host
}

// ServeLibrary serves Busybox as Docker Hub's busybox:latest and
// busybox:1.36 (library/busybox), for a runtime to pull "busybox" through as
// its mirror (embedded.Config.ImageMirror), and returns the registry's
// host:port.
func ServeLibrary(t testing.TB) string {
	t.Helper()
	bb := Must(t, Busybox)
	return Serve(t, map[string]v1.Image{"library/busybox:latest": bb, "library/busybox:1.36": bb})
}

// MirrorTransport adds containerd's ns parameter to every request, as
// containerd asks a mirror of the registry NS: a ggcr client pulls through a
// mirror with it.
type MirrorTransport struct{ NS string }

func (m MirrorTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	q := req.URL.Query()
	q.Set("ns", m.NS)
	req.URL.RawQuery = q.Encode()
	return http.DefaultTransport.RoundTrip(req)
}
