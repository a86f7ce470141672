package images

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jetlet/jetlet/internal/atomicfile"
)

func exists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Lstat(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestHeldLayersOutliveRemoveUntilRelease, across a restart of the store.
func TestHeldLayersOutliveRemoveUntilRelease(t *testing.T) {
	reg := newTestRegistry(t, nil)
	base := layer(t, file("base", "base", 0o644))
	refA := reg.pushImage(t, "a:1", testImage(t, "a", base, layer(t, file("a", "a", 0o644))))
	refB := reg.pushImage(t, "b:1", testImage(t, "b", base, layer(t, file("b", "b", 0o644))))
	dir := filepath.Join(t.TempDir(), "images")
	s := openStore(t, Options{Dir: dir})
	a, err := s.Pull(t.Context(), refA, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Pull(t.Context(), refB, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, err := s.Hold("ctr-1", refA)
	if err != nil || held.ID != a.ID {
		t.Fatalf("Hold = %v, %v", held, err)
	}
	if err := s.Remove(a.ID); err != nil {
		t.Fatal(err)
	}
	if s.Lookup(refA) != nil {
		t.Error("the removed image is still found")
	}
	for _, d := range s.LayerDirs(a) {
		if !exists(t, d) {
			t.Errorf("held layer %s was removed", d)
		}
	}
	if err := s.Remove(a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove = %v, want ErrNotFound", err)
	}
	if _, err := s.Hold("ctr-2", a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("Hold of a removed image = %v, want ErrNotFound", err)
	}

	// A restart keeps the records and the hold.
	s = openStore(t, Options{Dir: dir})
	if l := s.List(); len(l) != 1 || l[0].ID != b.ID {
		t.Fatalf("reopened store lists %v, want only b", l)
	}
	if got := s.Lookup(refB); got == nil || !slices.Equal(got.RepoTags, b.RepoTags) || !slices.Equal(got.Layers, b.Layers) || got.Config.User != b.Config.User {
		t.Errorf("reopened record of b: %+v, want %+v", got, b)
	}
	for _, d := range s.LayerDirs(a) {
		if !exists(t, d) {
			t.Errorf("held layer %s was removed by a restart", d)
		}
	}
	if err := s.Remove(refB); err != nil {
		t.Fatal(err)
	}
	bDirs := s.LayerDirs(b)
	if exists(t, bDirs[0]) {
		t.Error("b's own layer outlived b")
	}
	if !exists(t, bDirs[1]) {
		t.Error("the base layer, held through a, went with b")
	}
	if err := s.Release("ctr-1"); err != nil {
		t.Fatal(err)
	}
	if left := layerEntries(t, s); len(left) != 0 {
		t.Errorf("layers/ holds %v after the last release", left)
	}
	if err := s.Release("ctr-1"); err != nil {
		t.Errorf("a second Release = %v, want nil", err)
	}
}

// TestHoldingAnotherImageReleasesTheFirst, and an image's layers stay
// while it is recorded even when nothing holds it.
func TestHoldingAnotherImageReleasesTheFirst(t *testing.T) {
	reg := newTestRegistry(t, nil)
	refA := reg.pushImage(t, "a:1", simpleImage(t, "a"))
	refB := reg.pushImage(t, "b:1", simpleImage(t, "b"))
	s := openStore(t, Options{})
	a, err := s.Pull(t.Context(), refA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pull(t.Context(), refB, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Hold("c", refA); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(refA); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Hold("c", refB); err != nil {
		t.Fatal(err)
	}
	if exists(t, s.LayerDirs(a)[0]) {
		t.Error("a's layer outlived the hold that moved to b")
	}
	if err := s.Release("c"); err != nil {
		t.Fatal(err)
	}
	if n := len(layerEntries(t, s)); n != 1 {
		t.Errorf("layers/ holds %d entries, want b's", n)
	}
}

// TestOpenCleansWhatACrashLeft: temporary dirs, unreferenced layers, and
// records of images whose layers are gone.
func TestOpenCleansWhatACrashLeft(t *testing.T) {
	reg := newTestRegistry(t, nil)
	refA := reg.pushImage(t, "a:1", simpleImage(t, "a"))
	refB := reg.pushImage(t, "b:1", simpleImage(t, "b"))
	dir := filepath.Join(t.TempDir(), "images")
	s := openStore(t, Options{Dir: dir})
	a, err := s.Pull(t.Context(), refA, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Pull(t.Context(), refB, nil)
	if err != nil {
		t.Fatal(err)
	}
	layers := filepath.Join(dir, "layers")
	leftovers := []string{
		filepath.Join(layers, ".tmp-0123456789ab-42"),
		filepath.Join(layers, ".rm-7-"+strings.Repeat("cd", 32)),
		filepath.Join(layers, strings.Repeat("ef", 32)), // an unpack never recorded
	}
	for _, p := range leftovers {
		if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "sub", "f"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(s.LayerDirs(b)[0]); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, Options{Dir: dir})
	for _, p := range leftovers {
		if exists(t, p) {
			t.Errorf("Open left %s", p)
		}
	}
	if s.Lookup(b.ID) != nil {
		t.Error("an image missing a layer is still recorded")
	}
	if got := s.Lookup(a.ID); got == nil {
		t.Error("a whole image was dropped")
	}
	// The next pull fetches it again.
	if _, err := s.Pull(t.Context(), refB, nil); err != nil {
		t.Fatal(err)
	}
	if !exists(t, s.LayerDirs(b)[0]) {
		t.Error("the pull did not unpack the missing layer")
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("store dir mode %v, want 0700", fi.Mode().Perm())
	}
}

func TestOpenRefusesACorruptRecord(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, recordsFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); err == nil || !strings.Contains(err.Error(), recordsFile) {
		t.Errorf("Open of a corrupt record = %v", err)
	}
	if _, err := Open(Options{}); err == nil {
		t.Error("Open without a directory succeeded")
	}
}

func TestUsage(t *testing.T) {
	reg := newTestRegistry(t, nil)
	ref := reg.pushImage(t, "a:1", testImage(t, "a",
		layer(t, file("f1", strings.Repeat("x", 100_000), 0o644), file("f2", "y", 0o644)),
		layer(t, file("f3", "z", 0o644))))
	s := openStore(t, Options{})
	b0, i0, mnt := s.Usage()
	if mnt != s.dir {
		t.Errorf("mountpoint %s, want %s", mnt, s.dir)
	}
	if _, err := s.Pull(t.Context(), ref, nil); err != nil {
		t.Fatal(err)
	}
	b1, i1, _ := s.Usage()
	if b1 < b0+100_000 {
		t.Errorf("usage grew from %d to %d bytes, want 100,000 more at least", b0, b1)
	}
	// Two layer roots and three files.
	if i1 < i0+5 {
		t.Errorf("inodes grew from %d to %d, want 5 more at least", i0, i1)
	}
	if b2, i2, _ := s.Usage(); b2 != b1 || i2 != i1 {
		t.Errorf("usage changed with nothing done: %d/%d then %d/%d", b1, i1, b2, i2)
	}
}

// A store whose images.json holds the holds (as every store did before
// holds got files of their own) keeps them across Open: they move to their
// files, their layers stay, and a Release still frees them.
func TestHoldsInImagesJSONAreKept(t *testing.T) {
	reg := newTestRegistry(t, nil)
	ref := reg.pushImage(t, "a:1", testImage(t, "a", layer(t, file("a", "a", 0o644))))
	dir := filepath.Join(t.TempDir(), "images")
	s := openStore(t, Options{Dir: dir})
	im, err := s.Pull(t.Context(), ref, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Hold("ctr-1", im.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(im.ID); err != nil {
		t.Fatal(err)
	}
	// The store as an older jetlet left it: no hold files, images.json
	// with no image and the hold.
	if err := os.RemoveAll(filepath.Join(dir, holdsDir)); err != nil {
		t.Fatal(err)
	}
	legacy := records{Images: []*Image{}, Holds: map[string]*hold{"ctr-1": {Image: im.ID, Layers: im.Layers}}}
	if err := atomicfile.WriteJSON(filepath.Join(dir, recordsFile), legacy); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, Options{Dir: dir})
	for _, d := range s.LayerDirs(im) {
		if !exists(t, d) {
			t.Errorf("layer %s, held in images.json, was removed by Open", d)
		}
	}
	var rec records
	if err := atomicfile.ReadJSON(filepath.Join(dir, recordsFile), &rec); err != nil || len(rec.Holds) != 0 {
		t.Errorf("images.json after Open: %+v, %v; want no holds", rec, err)
	}
	if !exists(t, s.holdPath("ctr-1")) {
		t.Error("the hold has no file of its own")
	}
	if err := s.Release("ctr-1"); err != nil {
		t.Fatal(err)
	}
	if left := layerEntries(t, s); len(left) != 0 {
		t.Errorf("layers/ holds %v after the release", left)
	}
}

// BenchmarkHoldRelease is a container's hold and release beside 2,000
// holds (1,000 pods of two containers): each rewrote images.json with
// every hold under the store's lock (B/op and allocs/op grew with them);
// now each writes and removes its own file.
func BenchmarkHoldRelease(b *testing.B) {
	reg := newTestRegistry(b, nil)
	ref := reg.pushImage(b, "a:1", testImage(b, "a", layer(b, file("a", "a", 0o644))))
	s := openStore(b, Options{Dir: filepath.Join(b.TempDir(), "images")})
	if _, err := s.Pull(b.Context(), ref, nil); err != nil {
		b.Fatal(err)
	}
	for i := range 2000 {
		if _, err := s.Hold(fmt.Sprintf("ctr-%d", i), ref); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Hold("new", ref); err != nil {
			b.Fatal(err)
		}
		if err := s.Release("new"); err != nil {
			b.Fatal(err)
		}
	}
}
