package client_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/jetlettest"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	ca := &testCA{dir: t.TempDir()}
	ca.cert, ca.key = ca.issue(t, "ca", &x509.Certificate{
		Subject:               pkix.Name{CommonName: "jetlet test CA"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	return ca
}

// issue signs tmpl with the CA (itself for the CA) and writes name.crt and
// name.key.
func (ca *testCA) issue(t *testing.T, name string, tmpl *x509.Certificate) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	parent, signer := tmpl, key
	if ca.cert != nil {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, ca.path(name+".crt"), "CERTIFICATE", der)
	writePEM(t, ca.path(name+".key"), "EC PRIVATE KEY", keyDER)
	return cert, key
}

func (ca *testCA) path(file string) string { return filepath.Join(ca.dir, file) }

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestMutualTLS(t *testing.T) {
	ca := newTestCA(t)
	ca.issue(t, "server", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "nats"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	})
	ca.issue(t, "client", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "jetlet"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	})
	s := startPermServer(t, "n1", fmt.Sprintf("tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }",
		ca.path("server.crt"), ca.path("server.key"), ca.path("ca.crt")))
	tlsFlags := []string{"--nats-tls-ca", ca.path("ca.crt"), "--nats-tls-cert", ca.path("client.crt"), "--nats-tls-key", ca.path("client.key")}

	res := s.as(t, "operator", "provision")
	wantRefused(t, res, "check --nats-tls-ca, --nats-tls-cert and --nats-tls-key")
	if res := s.as(t, "operator", append([]string{"provision"}, tlsFlags...)...); res.code != 0 {
		t.Fatalf("provision over TLS: exit %d", res.code)
	}

	dataDir := t.TempDir()
	jetlettest.RemovePodsOnCleanup(t, dataDir)
	n1 := jetlettest.Start(t, append([]string{"run", "--node", "n1", "--data-dir", dataDir, "--http-listen", "127.0.0.1:0",
		"--nats-url", s.url, "--nats-nkey", s.seed("node-n1")}, tlsFlags...)...)
	n1.WaitReady(60 * time.Second)

	res = s.as(t, "scheduler", append([]string{"apply", "-f", mustAbs(t, webYAML), "--node", "n1", "--wait"}, tlsFlags...)...)
	if res.code != 0 || !strings.Contains(res.stdout, "Synced") {
		t.Errorf("apply --wait over TLS: exit %d", res.code)
	}
	// Without the client certificate the server refuses the handshake.
	res = s.as(t, "scheduler", "get", "pods", "--nats-tls-ca", ca.path("ca.crt"))
	wantRefused(t, res, "cannot reach NATS")
}
