package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// serviceIP is the first address of the service range that up gives
// kube-apiserver: the kubernetes Service's, which its serving cert names.
const (
	serviceRange = "10.0.0.0/24"
	serviceIP    = "10.0.0.1"
)

// pki is the control plane's certificates and keys, as files in dir.
type pki struct {
	dir    string
	ca     *x509.Certificate
	caKey  crypto.Signer
	serial int64
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// frontProxyClient is the user of kube-apiserver's client cert to
// extension API servers, the only one they take request headers from.
const frontProxyClient = "front-proxy-client"

// newPKI makes a CA called cn in dir.
func newPKI(dir, cn string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	key, err := p.writeKey("ca.key")
	if err != nil {
		return nil, err
	}
	tmpl := p.template(cn)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	if p.ca, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	p.caKey = key
	if err := writePEM(p.path("ca.crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) template(cn string, org ...string) *x509.Certificate {
	p.serial++
	return &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: cn, Organization: org},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * 365 * time.Hour),
	}
}

// serving issues a serving cert for cn on the loopback address, localhost
// and sans (addresses and names): name.crt and name.key.
func (p *pki) serving(name, cn string, sans ...string) error {
	tmpl := p.template(cn)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	for _, san := range append([]string{"127.0.0.1", "localhost"}, sans...) {
		if ip := net.ParseIP(san); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, san)
		}
	}
	return p.issue(name, tmpl)
}

// client issues a client cert for user cn in groups org: name.crt and name.key.
func (p *pki) client(name, cn string, org ...string) error {
	tmpl := p.template(cn, org...)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return p.issue(name, tmpl)
}

func (p *pki) issue(name string, tmpl *x509.Certificate) error {
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	key, err := p.writeKey(name + ".key")
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.caKey)
	if err != nil {
		return err
	}
	return writePEM(p.path(name+".crt"), "CERTIFICATE", der)
}

func (p *pki) writeKey(name string) (crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return key, writePEM(p.path(name), "EC PRIVATE KEY", der)
}

// httpClient is a client of kube-apiserver with the client cert name.
func (p *pki) httpClient(name string) (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(p.path(name+".crt"), p.path(name+".key"))
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.ca)
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}},
	}, nil
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}

// kubeconfig writes a kubeconfig for the client cert name at server, the
// cert and key inlined so that it can be copied anywhere.
func (p *pki) kubeconfig(path, name, server string) error {
	data := func(file string) (string, error) {
		b, err := os.ReadFile(p.path(file))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := data("ca.crt")
	if err != nil {
		return err
	}
	cert, err := data(name + ".crt")
	if err != nil {
		return err
	}
	key, err := data(name + ".key")
	if err != nil {
		return err
	}
	conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: controlplane
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: controlplane
  context:
    cluster: controlplane
    user: %s
current-context: controlplane
`, server, ca, name, cert, key, name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(conf), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
