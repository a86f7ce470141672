package images

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/test/syncbuf"
)

func TestPullRecordsTheImage(t *testing.T) {
	reg := newTestRegistry(t, nil)
	img := simpleImage(t, "one")
	ref := reg.pushImage(t, "app:1", img)
	s := openStore(t, Options{})

	im, err := s.Pull(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	want := &Image{
		ID:          configName(t, img),
		RepoTags:    []string{ref},
		RepoDigests: []string{reg.host + "/app@" + digestOf(t, img).String()},
		Size:        uint64(m.Config.Size + m.Layers[0].Size),
		Layers:      []string{m.Layers[0].Digest.String()}, // replaced below
		Config: Config{
			Entrypoint: []string{"/bin/sh"},
			Cmd:        []string{"-c", "true"},
			Env:        []string{"PATH=/usr/bin:/bin"},
			WorkingDir: "/work",
			User:       "1000:1000",
			StopSignal: "SIGINT",
			Volumes:    []string{"/cache", "/data"},
			Labels:     map[string]string{"test": "one"},
		},
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	want.Layers = []string{cf.RootFS.DiffIDs[0].String()}
	if diff := imageDiff(im, want); diff != "" {
		t.Errorf("pulled image: %s", diff)
	}
	if b, err := s.ReadFile(im, "/etc/label"); err != nil || string(b) != "one" {
		t.Errorf("ReadFile(/etc/label) = %q, %v", b, err)
	}
	for _, q := range []string{ref, im.ID, strings.TrimPrefix(im.ID, "sha256:"), im.ID[:11], im.ID[7:11], want.RepoDigests[0]} {
		if got := s.Lookup(q); got == nil || got.ID != im.ID {
			t.Errorf("Lookup(%q) = %v, want the image", q, got)
		}
	}
	for _, q := range []string{"", im.ID[7:10], reg.host + "/app:2", "sha256:" + strings.Repeat("0", 64)} {
		if got := s.Lookup(q); got != nil {
			t.Errorf("Lookup(%q) = %s, want nil", q, got.ID)
		}
	}
	if l := s.List(); len(l) != 1 || l[0].ID != im.ID {
		t.Errorf("List() = %v", l)
	}
	// The caller's copy is its own.
	im.RepoTags[0] = "changed"
	if got := s.Lookup(im.ID); got.RepoTags[0] != ref {
		t.Error("changing a returned image changed the store's record")
	}
}

func imageDiff(got, want *Image) string {
	g, w := fmt.Sprintf("%+v", *got), fmt.Sprintf("%+v", *want)
	if g != w {
		return fmt.Sprintf("\n got %s\nwant %s", g, w)
	}
	return ""
}

func TestPullOfAMovedTagMovesTheTag(t *testing.T) {
	reg := newTestRegistry(t, nil)
	ref := reg.pushImage(t, "app:1", simpleImage(t, "old"))
	s := openStore(t, Options{})
	old, err := s.Pull(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg.pushImage(t, "app:1", simpleImage(t, "new"))
	cur, err := s.Pull(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cur.ID == old.ID {
		t.Fatal("the new image has the old id")
	}
	if got := s.Lookup(ref); got.ID != cur.ID {
		t.Errorf("%s names %s, want the new image", ref, got.ID)
	}
	// The old image stays, by its digest, as on containerd.
	o := s.Lookup(old.ID)
	if o == nil || len(o.RepoTags) != 0 || !slices.Equal(o.RepoDigests, old.RepoDigests) {
		t.Errorf("old image after the tag moved: %+v", o)
	}
}

func TestPullOfAMissingImageIsErrNotFound(t *testing.T) {
	reg := newTestRegistry(t, nil)
	reg.pushImage(t, "app:1", simpleImage(t, "one"))
	s := openStore(t, Options{})
	for _, ref := range []string{reg.host + "/app:2", reg.host + "/nothing:1", reg.host + "/app@sha256:" + strings.Repeat("ab", 32)} {
		_, err := s.Pull(t.Context(), ref, nil)
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Pull(%s) = %v, want ErrNotFound", ref, err)
			continue
		}
		if !strings.Contains(err.Error(), ref) {
			t.Errorf("error %q does not name %s", err, ref)
		}
	}
	if _, err := s.Pull(t.Context(), "Upper/Case", nil); err == nil || !strings.Contains(err.Error(), "Upper/Case") {
		t.Errorf("Pull of an invalid reference = %v", err)
	}
}

func TestPullFromAPrivateRegistry(t *testing.T) {
	const user, pass = "alice", "s3cret-pass-XYZ"
	reg := newTestRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	ref := reg.pushImage(t, "private:1", simpleImage(t, "private"))
	var logs syncbuf.Buffer
	s := openStore(t, Options{Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})

	_, err := s.Pull(t.Context(), ref, nil)
	if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), ref) {
		t.Errorf("anonymous pull: %v, want ErrUnauthorized naming %s", err, ref)
	}
	wrong := &Auth{Username: user, Password: "wrong-" + pass}
	_, err = s.Pull(t.Context(), ref, wrong)
	if !errors.Is(err, ErrUnauthorized) {
		t.Errorf("pull with a wrong password: %v, want ErrUnauthorized", err)
	}
	if err != nil && strings.Contains(err.Error(), pass) {
		t.Errorf("the error holds the password: %v", err)
	}
	for _, auth := range []*Auth{
		{Username: user, Password: pass},
		{Auth: base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))},
	} {
		im, err := s.Pull(t.Context(), ref, auth)
		if err != nil {
			t.Fatalf("pull with credentials: %v", err)
		}
		if im.RepoTags[0] != ref {
			t.Errorf("RepoTags = %v", im.RepoTags)
		}
	}
	if strings.Contains(logs.String(), pass) {
		t.Error("the logs hold the password")
	}
	a := Auth{Username: user, Password: pass}
	js, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var zl syncbuf.Buffer
	zlog := zerolog.New(&zl)
	zlog.Info().Object("auth", &a).Msg("")
	for _, out := range []string{fmt.Sprint(a), fmt.Sprintf("%+v", a), fmt.Sprintf("%#v", a), fmt.Sprint(&a), string(js), zl.String()} {
		if strings.Contains(out, pass) {
			t.Errorf("Auth prints its password: %s", out)
		}
	}
}

// TestConcurrentPullsFetchEachBlobOnce: pulls of one reference at once are
// one pull, a layer two images share is fetched once, and a layer already
// unpacked is not fetched again.
func TestConcurrentPullsFetchEachBlobOnce(t *testing.T) {
	reg := newTestRegistry(t, nil)
	base := layer(t, file("base", "base", 0o644))
	a := testImage(t, "a", base, layer(t, file("a", "a", 0o644)))
	b := testImage(t, "b", base, layer(t, file("b", "b", 0o644)))
	c := testImage(t, "c", base, layer(t, file("c", "c", 0o644)))
	refA := reg.pushImage(t, "a:1", a)
	refB := reg.pushImage(t, "b:1", b)
	refC := reg.pushImage(t, "c:1", c)
	s := openStore(t, Options{})

	start := make(chan struct{})
	var wg sync.WaitGroup
	ids := make([]string, 10)
	errs := make([]error, 10)
	for i := range 10 {
		ref := refA
		if i == 9 {
			ref = refB
		}
		wg.Go(func() {
			<-start
			im, err := s.Pull(t.Context(), ref, nil)
			errs[i] = err
			if err == nil {
				ids[i] = im.ID
			}
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
	}
	for i := range 9 {
		if ids[i] != configName(t, a) {
			t.Errorf("pull %d got %s, want %s", i, ids[i], configName(t, a))
		}
	}
	for _, img := range []v1.Image{a, b} {
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
			if n := reg.blobGets(d.Digest); n != 1 {
				t.Errorf("blob %s fetched %d times, want once", d.Digest, n)
			}
		}
	}
	if _, err := s.Pull(t.Context(), refC, nil); err != nil {
		t.Fatal(err)
	}
	if n := reg.blobGets(digestOf(t, base)); n != 1 {
		t.Errorf("the base layer was fetched again for a third image: %d GETs", n)
	}
}

// TestCancelledPullLeavesNothing: a pull whose caller gives up while a
// layer downloads stops, and leaves no record and no layer behind.
func TestCancelledPullLeavesNothing(t *testing.T) {
	slow := layer(t, file("slow", "slow", 0o644))
	slowDigest := digestOf(t, slow)
	started := make(chan struct{})
	var once sync.Once
	reg := newTestRegistry(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/blobs/"+slowDigest.String()) {
				once.Do(func() { close(started) })
				<-r.Context().Done()
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	fast := layer(t, file("fast", "fast", 0o644))
	ref := reg.pushImage(t, "slow:1", testImage(t, "slow", fast, slow))
	s := openStore(t, Options{})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := s.Pull(ctx, ref, nil)
		done <- err
	}()
	<-started
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull: %v, want context.Canceled", err)
	}
	if !strings.Contains(err.Error(), ref) {
		t.Errorf("error %q does not name the reference", err)
	}
	if s.Lookup(ref) != nil || len(s.List()) != 0 {
		t.Error("a cancelled pull recorded the image")
	}
	if left := layerEntries(t, s); len(left) != 0 {
		t.Errorf("layers/ holds %v after a cancelled pull", left)
	}
}

func TestPullThroughTheMirror(t *testing.T) {
	origin := newTestRegistry(t, nil)
	mirror := newTestRegistry(t, nil)
	fromMirror := simpleImage(t, "mirror")
	ref := origin.pushImage(t, "app:1", simpleImage(t, "origin"))
	mirror.pushImage(t, "app:1", fromMirror)
	onlyOrigin := simpleImage(t, "only-origin")
	refOnly := origin.pushImage(t, "only:1", onlyOrigin)
	s := openStore(t, Options{Mirror: mirror.host})

	auth := &Auth{Username: "u", Password: "secret-for-the-origin"}
	im, err := s.Pull(t.Context(), ref, auth)
	if err != nil {
		t.Fatal(err)
	}
	if im.ID != configName(t, fromMirror) {
		t.Errorf("pulled %s, want the mirror's image %s", im.ID, configName(t, fromMirror))
	}
	if !slices.Equal(im.RepoTags, []string{ref}) {
		t.Errorf("RepoTags = %v, want the origin's reference", im.RepoTags)
	}
	if n := origin.getCount("/v2/app/manifests/1"); n != 0 {
		t.Errorf("the origin was asked for the manifest %d times", n)
	}

	im, err = s.Pull(t.Context(), refOnly, auth)
	if err != nil {
		t.Fatal(err)
	}
	if im.ID != configName(t, onlyOrigin) {
		t.Errorf("pulled %s, want the origin's image", im.ID)
	}
	if n := mirror.getCount("/v2/only/manifests/1"); n == 0 {
		t.Error("the mirror was not tried first")
	}
	var saw int
	for _, r := range mirror.seen() {
		if r.URL.Path == "/v2/" {
			continue
		}
		saw++
		if got := r.URL.Query().Get("ns"); got != origin.host {
			t.Errorf("%s %s: ns=%q, want %s", r.Method, r.URL, got, origin.host)
		}
		if r.Header.Get("Authorization") != "" {
			t.Errorf("%s %s carried the origin's credentials to the mirror", r.Method, r.URL)
		}
	}
	if saw == 0 {
		t.Error("the mirror saw no request")
	}
}

func TestPinnedImages(t *testing.T) {
	reg := newTestRegistry(t, nil)
	pause := reg.pushImage(t, "pause:3.9", simpleImage(t, "pause"))
	app := reg.pushImage(t, "app:1", simpleImage(t, "app"))
	s := openStore(t, Options{Pinned: []string{pause}})
	p, err := s.Pull(t.Context(), pause, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Pull(t.Context(), app, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Pinned || a.Pinned {
		t.Errorf("pinned: pause %v, app %v; want true, false", p.Pinned, a.Pinned)
	}
	if !s.Lookup(pause).Pinned {
		t.Error("Lookup lost the pin")
	}
	if _, err := Open(Options{Dir: t.TempDir(), Pinned: []string{"Bad/Ref"}}); err == nil {
		t.Error("Open took an invalid pinned reference")
	}
}

func TestPullPicksThisPlatformFromAnIndex(t *testing.T) {
	reg := newTestRegistry(t, nil)
	mine := simpleImage(t, "mine")
	other := simpleImage(t, "other")
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: otherArch()}}},
		mutate.IndexAddendum{Add: mine, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)
	ref := reg.pushIndex(t, "multi:1", idx)
	s := openStore(t, Options{})
	im, err := s.Pull(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if im.ID != configName(t, mine) {
		t.Errorf("pulled %s, want this platform's %s", im.ID, configName(t, mine))
	}
	// The digest is the index's, as containerd records it.
	if want := []string{reg.host + "/multi@" + digestOf(t, idx).String()}; !slices.Equal(im.RepoDigests, want) {
		t.Errorf("RepoDigests = %v, want %v", im.RepoDigests, want)
	}
	// By digest.
	byDigest := reg.host + "/multi@" + digestOf(t, idx).String()
	im2, err := s.Pull(t.Context(), byDigest, nil)
	if err != nil || im2.ID != im.ID {
		t.Fatalf("pull by digest: %v, %v", im2, err)
	}
}

func otherArch() string {
	if runtime.GOARCH == "s390x" {
		return "amd64"
	}
	return "s390x"
}

// recordingTransport answers every request with an error, keeping them.
type recordingTransport struct {
	mu   sync.Mutex
	urls []string // guarded by mu
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.urls = append(r.urls, req.URL.String())
	r.mu.Unlock()
	return nil, errors.New("no network in this test")
}

// TestPlainHTTPOnlyToLoopbackAndInsecureRegistries: ggcr would also try
// plain HTTP on a private address; the store refuses it.
func TestPlainHTTPOnlyToLoopbackAndInsecureRegistries(t *testing.T) {
	rt := &recordingTransport{}
	s := openStore(t, Options{Transport: rt, Insecure: []string{"insecure.example:5000", "anyport.example"}})
	if _, err := s.Pull(t.Context(), "10.1.2.3:5000/app:1", nil); err == nil {
		t.Fatal("pull with no network succeeded")
	}
	rt.mu.Lock()
	urls := slices.Clone(rt.urls)
	rt.mu.Unlock()
	if len(urls) == 0 {
		t.Fatal("no request was made")
	}
	for _, u := range urls {
		if strings.HasPrefix(u, "http:") {
			t.Errorf("plain HTTP to a private address: %s", u)
		}
	}
	for host, want := range map[string]bool{
		"localhost": true, "localhost:5000": true, "127.0.0.1:5000": true, "127.9.9.9": true,
		"[::1]:5000": true, "insecure.example:5000": true, "INSECURE.example:5000": true,
		"insecure.example:5001": false, "anyport.example:1234": true, "anyport.example": true,
		"10.1.2.3:5000": false, "registry.example": false, "docker.io": false,
	} {
		if got := s.plainHTTP(host); got != want {
			t.Errorf("plainHTTP(%s) = %v, want %v", host, got, want)
		}
	}
}
