package registry_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/jetlet/jetlet/test/testimages"
	"github.com/nats-io/nats.go/jetstream"
)

func TestAPushedImageIsPulledThroughTheRegistry(t *testing.T) {
	r := startRegistry(t, jetstream.FileStorage)
	img := randomImage(t, 64<<10, 3, 1)
	res := r.push(t, "busybox:1.36", img)
	if res.Ref != "docker.io/library/busybox:1.36" || res.Digest != digestOf(t, img) || res.Stored != 5 || res.Blobs != 5 || !res.RefStored {
		t.Errorf("push = %+v, want docker.io/library/busybox:1.36 of %s, its 5 blobs stored", res, digestOf(t, img))
	}
	for _, ref := range []string{"library/busybox:1.36", "busybox:1.36", "library/busybox@" + res.Digest} {
		t.Run(ref, func(t *testing.T) {
			pulled, err := r.pull(t, ref, nil)
			if err != nil {
				t.Fatalf("pull: %v", err)
			}
			if got := digestOf(t, pulled); got != res.Digest {
				t.Errorf("pulled digest %s, pushed %s", got, res.Digest)
			}
			checkBlobs(t, pulled)
		})
	}
}

// TestTheRegistryIsAMirrorOfEveryRegistry: containerd asks a mirror with
// ?ns=<registry host>.
func TestTheRegistryIsAMirrorOfEveryRegistry(t *testing.T) {
	r := startRegistry(t, jetstream.FileStorage)
	img := randomImage(t, 4<<10, 1, 2)
	res := r.push(t, "ghcr.io/o/app:v1", img)

	pulled, err := r.pull(t, "o/app:v1", testimages.MirrorTransport{NS: "ghcr.io"})
	if err != nil {
		t.Fatalf("pull with ns=ghcr.io: %v", err)
	}
	if got := digestOf(t, pulled); got != res.Digest {
		t.Errorf("pulled %s, pushed %s", got, res.Digest)
	}
	checkBlobs(t, pulled)
	// The manifest as containerd asks for it.
	resp := r.get(t, http.MethodGet, "/v2/o/app/manifests/v1?ns=ghcr.io")
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Docker-Content-Digest") != res.Digest ||
		resp.Header.Get("Content-Type") != res.MediaType || sha256Digest(body) != res.Digest {
		t.Errorf("GET manifest ?ns=ghcr.io: %d, digest %q, type %q, body of %s",
			resp.StatusCode, resp.Header.Get("Docker-Content-Digest"), resp.Header.Get("Content-Type"), sha256Digest(body))
	}
	// docker.io's busybox is library/busybox there.
	r.push(t, "docker.io/library/busybox:1.36", img)
	if resp := r.get(t, http.MethodHead, "/v2/library/busybox/manifests/1.36?ns=docker.io"); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD library/busybox ?ns=docker.io: %d", resp.StatusCode)
	}
	// Without ns the name is taken as it is: o/app is docker.io's.
	_, err = r.pull(t, "o/app:v1", nil)
	wantCode(t, err, http.StatusNotFound, "NAME_UNKNOWN")
}

func TestTheRegistryAnswersWhatItDoesNotHold(t *testing.T) {
	r := startRegistry(t, jetstream.FileStorage)
	img := randomImage(t, 4<<10, 1, 3)
	res := r.push(t, "busybox:1.36", img)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	layer, err := layers[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	absent := "sha256:" + strings.Repeat("0", 64)
	tests := []struct {
		name, method, path string
		status             int
		code               string
	}{
		{"the API", http.MethodGet, "/v2/", http.StatusOK, ""},
		{"a tag of a repository the store holds", http.MethodGet, "/v2/library/busybox/manifests/1.37", http.StatusNotFound, "MANIFEST_UNKNOWN"},
		{"a tag, HEAD", http.MethodHead, "/v2/library/busybox/manifests/1.37", http.StatusNotFound, ""},
		{"a repository it does not hold", http.MethodGet, "/v2/library/alpine/manifests/3", http.StatusNotFound, "NAME_UNKNOWN"},
		{"another registry's", http.MethodGet, "/v2/library/busybox/manifests/1.36?ns=quay.io", http.StatusNotFound, "NAME_UNKNOWN"},
		{"a manifest digest it does not hold", http.MethodGet, "/v2/library/busybox/manifests/" + absent, http.StatusNotFound, "MANIFEST_UNKNOWN"},
		{"a layer as a manifest", http.MethodGet, "/v2/library/busybox/manifests/" + layer.String(), http.StatusNotFound, "MANIFEST_UNKNOWN"},
		{"a blob it does not hold", http.MethodGet, "/v2/library/busybox/blobs/" + absent, http.StatusNotFound, "BLOB_UNKNOWN"},
		{"a malformed digest", http.MethodGet, "/v2/library/busybox/blobs/sha256:xyz", http.StatusBadRequest, "DIGEST_INVALID"},
		{"an invalid name", http.MethodGet, "/v2/Library/BusyBox/manifests/1.36", http.StatusBadRequest, "NAME_INVALID"},
		{"a push", http.MethodPost, "/v2/library/busybox/blobs/uploads/", http.StatusMethodNotAllowed, "UNSUPPORTED"},
		{"a manifest put", http.MethodPut, "/v2/library/busybox/manifests/1.36", http.StatusMethodNotAllowed, "UNSUPPORTED"},
		{"a delete", http.MethodDelete, "/v2/library/busybox/manifests/" + res.Digest, http.StatusMethodNotAllowed, "UNSUPPORTED"},
		{"tags", http.MethodGet, "/v2/library/busybox/tags/list", http.StatusNotFound, "UNSUPPORTED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := r.get(t, tt.method, tt.path)
			body := readAll(t, resp)
			if resp.StatusCode != tt.status {
				t.Fatalf("%s %s: %d %s, want %d", tt.method, tt.path, resp.StatusCode, body, tt.status)
			}
			if tt.code == "" {
				return
			}
			var errs struct {
				Errors []struct{ Code, Message string }
			}
			if err := json.Unmarshal(body, &errs); err != nil || len(errs.Errors) != 1 || errs.Errors[0].Code != tt.code {
				t.Errorf("%s %s: body %s, want the error code %s", tt.method, tt.path, body, tt.code)
			}
		})
	}
}

func TestHeadAnswersTheSizeDigestAndType(t *testing.T) {
	r := startRegistry(t, jetstream.FileStorage)
	img := randomImage(t, 10000, 1, 4)
	res := r.push(t, "registry.k8s.io/pause:3.10", img)
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	layer := m.Layers[0]
	for _, tt := range []struct {
		path, digest, mediaType string
		size                    int64
	}{
		{"/v2/pause/manifests/3.10?ns=registry.k8s.io", res.Digest, res.MediaType, res.ManifestSize},
		{"/v2/registry.k8s.io/pause/manifests/3.10", res.Digest, res.MediaType, res.ManifestSize},
		{"/v2/registry.k8s.io/pause/manifests/" + res.Digest, res.Digest, res.MediaType, res.ManifestSize},
		{"/v2/registry.k8s.io/pause/blobs/" + layer.Digest.String(), layer.Digest.String(), "application/octet-stream", layer.Size},
		{"/v2/registry.k8s.io/pause/blobs/" + m.Config.Digest.String(), m.Config.Digest.String(), "application/octet-stream", m.Config.Size},
	} {
		for _, method := range []string{http.MethodHead, http.MethodGet} {
			resp := r.get(t, method, tt.path)
			body := readAll(t, resp)
			h := resp.Header
			if resp.StatusCode != http.StatusOK || h.Get("Docker-Content-Digest") != tt.digest || h.Get("Content-Type") != tt.mediaType ||
				h.Get("Content-Length") != strconv.FormatInt(tt.size, 10) {
				t.Errorf("%s %s: %d, digest %q, type %q, length %q; want 200, %s, %s, %d", method, tt.path, resp.StatusCode,
					h.Get("Docker-Content-Digest"), h.Get("Content-Type"), h.Get("Content-Length"), tt.digest, tt.mediaType, tt.size)
			}
			if method == http.MethodGet && sha256Digest(body) != tt.digest {
				t.Errorf("GET %s: a body of %s", tt.path, sha256Digest(body))
			}
			if method == http.MethodHead && len(body) != 0 {
				t.Errorf("HEAD %s: a body of %d bytes", tt.path, len(body))
			}
		}
	}
}

func (r *testRegistry) get(t testing.TB, method, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+r.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

func readAll(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// wantCode checks that err is the registry's answer status with code.
func wantCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var te *transport.Error
	if !errors.As(err, &te) {
		t.Fatalf("%v: want the registry's %d %s", err, status, code)
	}
	if te.StatusCode != status || len(te.Errors) != 1 || string(te.Errors[0].Code) != code {
		t.Errorf("%v: want %d %s", err, status, code)
	}
}

// TestABlobStoredWithOtherContentIsNotServed: an object under a blob's name
// whose content is not of that digest (written by hand, not by Push) is
// answered as missing, never served.
func TestABlobStoredWithOtherContentIsNotServed(t *testing.T) {
	r := startRegistry(t, jetstream.FileStorage)
	claimed := sha256Digest([]byte("what the name says"))
	if _, err := r.store.PutBytes(t.Context(), "blobs/"+claimed, []byte("something else")); err != nil {
		t.Fatal(err)
	}
	resp := r.get(t, http.MethodGet, "/v2/library/busybox/blobs/"+claimed)
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "BLOB_UNKNOWN") {
		t.Errorf("GET a blob stored with other content: %d %s, want 404 BLOB_UNKNOWN", resp.StatusCode, body)
	}
}
