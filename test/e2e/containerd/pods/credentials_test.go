package containerd_test

import (
	"archive/tar"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
)

// basicAuthRegistry is a real OCI registry (go-containerregistry's) that
// answers 401 with a Basic challenge to every request without user and
// password, as a private registry does.
type basicAuthRegistry struct {
	*httptest.Server
	user, password string
	refused        atomic.Int64 // requests answered 401
}

func newBasicAuthRegistry(t *testing.T, user, password string) *basicAuthRegistry {
	t.Helper()
	r := &basicAuthRegistry{user: user, password: password}
	backend := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); !ok || u != r.user || p != r.password {
			r.refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="jetlet-e2e"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, req)
	}))
	t.Cleanup(r.Close)
	return r
}

// host is the registry's host:port: a loopback address, which containerd
// pulls from over plain HTTP (after the registry of the bus that setup.sh's
// certs.d/_default/hosts.toml names, which no jetlet serves here).
func (r *basicAuthRegistry) host() string { return strings.TrimPrefix(r.URL, "http://") }

// pushStageBusybox pushes the stage's busybox image (stageBusybox) to ref,
// labelled "private-registry".
func pushStageBusybox(t *testing.T, ref string, auth authn.Authenticator) {
	t.Helper()
	img := stageBusybox(t, "private-registry")
	tag, err := name.NewTag(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithAuth(auth)); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// stageBusybox is the busybox image setup.sh built (its OCI layout tarball
// under $JETLET_CONTAINERD_DIR/images) as an image of its own: with label
// as the value of the label dev.jetlet.test in its config, so with its own
// id. (containerd names an image by one of its references; the same image
// pulled under another name would show the stage's other pods running that
// name.)
func stageBusybox(t *testing.T, label string) v1.Image {
	t.Helper()
	dir := os.Getenv("JETLET_CONTAINERD_DIR")
	tars, _ := filepath.Glob(filepath.Join(dir, "images", "busybox-*.tar"))
	if dir == "" || len(tars) != 1 {
		t.Fatalf("want the one busybox image tarball setup.sh builds under $JETLET_CONTAINERD_DIR/images (JETLET_CONTAINERD_DIR=%q), found %v", dir, tars)
	}
	layoutDir := t.TempDir()
	untar(t, tars[0], layoutDir)
	idx, err := layout.ImageIndexFromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("the busybox layout's index: %v (%v)", m, err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg := cf.Config
	cfg.Labels = map[string]string{"dev.jetlet.test": label}
	if img, err = mutate.Config(img, cfg); err != nil {
		t.Fatal(err)
	}
	return img
}

// untar extracts the regular files and directories of a tarball into dir.
func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
				var out *os.File
				if out, err = os.Create(target); err == nil {
					_, err = io.Copy(out, tr)
					err = errors.Join(err, out.Close())
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// writeDockerConfig writes Docker's config.json with one registry entry.
func writeDockerConfig(t *testing.T, path, host, user, password string) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{host: map[string]string{"auth": auth}}})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A pod whose image is in a registry behind basic auth: while the node's
// config.json has no credentials for that registry the pull fails (Failed,
// ErrImagePull naming the image, then ImagePullBackOff; containerd 1.6 says
// 401, 2.4 only "not found" after the registry of the bus's 404); once it
// holds them (jetlet re-reads the file), the pull succeeds and the pod runs.
// No password shows in jetlet's log (at trace level), results, events or
// status.
func TestPrivateRegistryPullWithNodeCredentials(t *testing.T) {
	s := newSuite(t)
	const user, password = "jetlet", "e2e-s3cr3t"
	reg := newBasicAuthRegistry(t, user, password)
	image := reg.host() + "/jetlet/busybox:auth-" + s.runID
	pushStageBusybox(t, image, &authn.Basic{Username: user, Password: password})

	creds := filepath.Join(shortDir(t), "config.json")
	writeDockerConfig(t, creds, "other.example.com", user, "other-s3cr3t")
	// The registry of the bus where hosts.toml names it, as on a node: each
	// pull asks it first, gets a 404 and goes on to the private registry.
	n := s.startNode(append([]string{"--image-credentials", creds, "--log-level", "trace"}, busRegistryFlags(t)...)...)
	n.waitBusRegistry()

	uid := s.uid("private")
	seq := n.publish(uid, s.podJSONWithImage(uid, 1, "Always", image, "echo pulled; "+untilTerm))
	r := n.waitResult(uid, seq, 60*time.Second)
	if r.Outcome != schemas.OutcomeFailed {
		t.Fatalf("apply without credentials: %s %q, want Failed", r.Outcome, r.Error)
	}
	var pull *schemas.ActionResult
	for i, a := range r.Actions {
		if a.Action == schemas.ActionPullImage {
			pull = &r.Actions[i]
		}
	}
	if pull == nil || pull.Error != "ErrImagePull" || !strings.Contains(pull.Message, image) {
		t.Fatalf("actions %+v: want PullImage failed with ErrImagePull naming %s", r.Actions, image)
	}
	t.Logf("pull without credentials: %s", pull.Message)
	if reg.refused.Load() == 0 {
		t.Error("the registry refused nothing: the pull did not reach it")
	}
	n.waitEvent(uid, schemas.EventImagePullFailed, 30*time.Second, nil)
	n.waitStatus(uid, 60*time.Second, "in ImagePullBackOff", func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && st.Containers[0].Reason == "ImagePullBackOff"
	})

	// The right password, without restarting jetlet: the retry after the
	// back-off pulls and the pod runs.
	writeDockerConfig(t, creds, reg.host(), user, password)
	n.waitStatus(uid, 90*time.Second, "Running", running)
	n.waitEvent(uid, schemas.EventImagePulled, 30*time.Second, nil)

	var shown []string
	for what, text := range map[string]string{
		"jetlet's log": n.proc.Logs(),
		"results":      n.storedJSON(schemas.StreamResults, "jetlet.result."+n.name+"."+uid),
		"events":       n.storedJSON(schemas.StreamEvents, "jetlet.event."+n.name+"."+uid+".>"),
	} {
		if strings.Contains(text, "s3cr3t") {
			shown = append(shown, what)
		}
	}
	if st, err := n.status(uid); err == nil {
		b, _ := json.Marshal(st)
		if strings.Contains(string(b), "s3cr3t") {
			shown = append(shown, "status")
		}
	}
	if len(shown) > 0 {
		t.Errorf("a password shows in %s", strings.Join(shown, ", "))
	}
	t.Logf("registry %s refused %d requests; image %s", reg.host(), reg.refused.Load(), image)
}

// storedJSON is every message of the stream on subject, as JSON text, for
// checks of what they must not hold.
func (n *node) storedJSON(stream, subject string) string {
	n.t.Helper()
	msgs, err := jetlettest.ReadAll[json.RawMessage](n.js, stream, subject)
	if err != nil {
		n.t.Fatalf("read %s %s: %v", stream, subject, err)
	}
	var b strings.Builder
	for _, m := range msgs {
		b.Write(m)
		b.WriteByte('\n')
	}
	return b.String()
}
