package testimages

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestServePullRoundTrip(t *testing.T) {
	busybox, httpd := must(t, Busybox), must(t, Httpd)
	host := Serve(t, map[string]v1.Image{"library/busybox:1.36": busybox, "team/httpd:v1": httpd})
	for ref, want := range map[string]v1.Image{host + "/library/busybox:1.36": busybox, host + "/team/httpd:v1": httpd} {
		got := pull(t, ref)
		if digest(t, got) != digest(t, want) {
			t.Errorf("%s: digest %s, want %s", ref, digest(t, got), digest(t, want))
		}
		if err := readAllLayers(got); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}
	if _, err := remote.Image(mustRef(t, host+"/library/busybox:nope")); err == nil {
		t.Errorf("a tag never pushed was pulled")
	}
}

func TestPrivateRegistryRefusesWithoutCredentials(t *testing.T) {
	busybox := must(t, Busybox)
	host := Serve(t, map[string]v1.Image{"private/busybox:1": busybox}, WithBasicAuth("jetlet", "s3cret"))
	ref := mustRef(t, host+"/private/busybox:1")

	for _, auth := range []authn.Authenticator{authn.Anonymous, &authn.Basic{Username: "jetlet", Password: "wrong"}} {
		_, err := remote.Image(ref, remote.WithAuth(auth))
		var terr *transport.Error
		if !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
			t.Errorf("pull with %T: %v, want 401", auth, err)
		}
	}
	got, err := remote.Image(ref, remote.WithAuth(&authn.Basic{Username: "jetlet", Password: "s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, got) != digest(t, busybox) {
		t.Errorf("digest %s, want %s", digest(t, got), digest(t, busybox))
	}
}

// TestRegistryOverTLSUnderAnotherName serves the registry as the critest
// stage does: over TLS, under a registry's name (registry.k8s.io) that
// resolves to 127.0.0.1, for a client that trusts NewTLS's CA.
func TestRegistryOverTLSUnderAnotherName(t *testing.T) {
	serverTLS, caPEM, err := NewTLS(CritestRegistries...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", serverTLS)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA PEM")
	}
	// What /etc/hosts does in the stage: every name is 127.0.0.1 (here,
	// the listener's port).
	dialer := &net.Dialer{}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, ln.Addr().String())
		},
	}
	critest, err := Critest()
	if err != nil {
		t.Fatal(err)
	}
	paths, err := RegistryPaths(map[string]v1.Image{CritestPause: critest[CritestPause], CritestPauseOld: critest[CritestPauseOld]})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 {
		t.Fatalf("paths %v, want pause:3.9 only", paths)
	}
	if err := Push(context.Background(), "registry.k8s.io", paths, remote.WithTransport(tr)); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{CritestPause, CritestPauseOld} {
		got, err := remote.Image(mustRef(t, ref), remote.WithTransport(tr))
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if digest(t, got) != digest(t, critest[CritestPause]) {
			t.Errorf("%s: digest %s", ref, digest(t, got))
		}
	}
	// Without the CA, the client refuses the server.
	plain := &http.Transport{DialContext: tr.DialContext}
	if _, err := remote.Image(mustRef(t, CritestPause), remote.WithTransport(plain)); err == nil {
		t.Errorf("a client without the CA pulled")
	}
}

func pull(t *testing.T, ref string) v1.Image {
	t.Helper()
	img, err := remote.Image(mustRef(t, ref))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return img
}

func mustRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
