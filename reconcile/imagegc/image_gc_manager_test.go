package imagegc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/pullmanager"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// gcImage is an image of a collection's table row, with its history.
type gcImage struct {
	id   string
	size uint64
	// seen and used are how long before the collection the image was
	// first detected and last seen in use (used 0: never).
	seen, used time.Duration
	pinned     bool
	// inUse: a container of it exists now.
	inUse bool
}

// newCollection is a manager over a fake runtime holding images with
// their histories, the image file system reporting fs, jetlet started
// running before the clock's now.
func newCollection(t *testing.T, p Policy, images []gcImage, fs filesystemStats, running time.Duration) (*ImageGCManager, *fakeRuntime, *fakeClock) {
	t.Helper()
	rt := newFakeRuntime()
	clock := &fakeClock{now: epoch.Add(-running)}
	m, err := New(rt, Config{Policy: p, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	clock.now = epoch
	m.statfs = func(path string) (filesystemStats, error) {
		if path != rt.mountpoint {
			return filesystemStats{}, fmt.Errorf("statfs of %s, not of the runtime's mountpoint %s", path, rt.mountpoint)
		}
		return fs, nil
	}
	for _, im := range images {
		rt.addImage(im.id, im.size, im.pinned)
		if im.inUse {
			rt.useImage(im.id)
		}
		r := &imageRecord{firstDetected: epoch.Add(-im.seen)}
		if im.used > 0 {
			r.lastUsed = epoch.Add(-im.used)
		}
		m.records[im.id] = r
	}
	return m, rt, clock
}

// TestGarbageCollectChooses is the choice of GarbageCollect: which images
// go, in which order, and which never do.
func TestGarbageCollectChooses(t *testing.T) {
	const capacity = 1000
	// atHigh is 85% used of the default policy: 50 bytes to free for 80%.
	atHigh := filesystemStats{capacity: capacity, available: 150}
	belowHigh := filesystemStats{capacity: capacity, available: 160}
	withMaxAge := func(maxAge time.Duration) Policy {
		p := DefaultPolicy()
		p.MaxAge = maxAge
		return p
	}
	tests := []struct {
		name    string
		policy  Policy
		images  []gcImage
		fs      filesystemStats
		running time.Duration // since jetlet started
		failing string        // an image whose removal fails
		want    []string      // the images left
		wantErr string
	}{
		{
			name:   "below the high threshold nothing goes",
			policy: DefaultPolicy(), fs: belowHigh, running: time.Hour,
			images: []gcImage{{id: "old", size: 100, seen: time.Hour}},
			want:   []string{"old"},
		},
		{
			name:   "at the high threshold the least recently used go until enough is freed",
			policy: DefaultPolicy(), fs: atHigh, running: time.Hour,
			images: []gcImage{
				{id: "used-10m-ago", size: 30, seen: time.Hour, used: 10 * time.Minute},
				{id: "used-20m-ago", size: 30, seen: time.Hour, used: 20 * time.Minute},
				{id: "never-used", size: 30, seen: time.Hour},
			},
			want: []string{"used-10m-ago"},
		},
		{
			name:   "between images never used the first detected goes first",
			policy: DefaultPolicy(), fs: atHigh, running: time.Hour,
			images: []gcImage{
				{id: "seen-30m-ago", size: 50, seen: 30 * time.Minute},
				{id: "seen-1h-ago", size: 50, seen: time.Hour},
			},
			want: []string{"seen-30m-ago"},
		},
		{
			name:   "an image younger than the minimum age stays, the next goes",
			policy: DefaultPolicy(), fs: atHigh, running: time.Hour,
			images: []gcImage{
				{id: "pulled-1m-ago", size: 100, seen: time.Minute},
				{id: "pulled-2m-ago", size: 100, seen: 2 * time.Minute},
				{id: "used-recently", size: 100, seen: time.Hour, used: time.Minute},
			},
			want: []string{"pulled-1m-ago", "used-recently"},
		},
		{
			name:   "images in use and pinned never go, even when too little is freed",
			policy: DefaultPolicy(), fs: atHigh, running: time.Hour,
			images: []gcImage{
				{id: "in-use", size: 500, seen: time.Hour, inUse: true},
				{id: "pinned", size: 500, seen: time.Hour, pinned: true},
				{id: "unused", size: 10, seen: time.Hour},
			},
			want:    []string{"in-use", "pinned"},
			wantErr: "attempted to free 50 bytes, but only found 10 bytes eligible to free",
		},
		{
			name:   "an image in use now goes last when no longer used",
			policy: DefaultPolicy(), fs: atHigh, running: time.Hour,
			images: []gcImage{
				{id: "in-use-now", size: 50, seen: time.Hour, used: 2 * time.Hour, inUse: true},
				{id: "used-1h-ago", size: 50, seen: time.Hour, used: time.Hour},
			},
			want: []string{"in-use-now"},
		},
		{
			name:   "a failed removal is reported and the next image goes instead",
			policy: DefaultPolicy(), fs: atHigh, running: time.Hour, failing: "first",
			images: []gcImage{
				{id: "first", size: 50, seen: 2 * time.Hour},
				{id: "second", size: 50, seen: time.Hour},
				{id: "third", size: 50, seen: time.Minute * 30},
			},
			want:    []string{"first", "third"},
			wantErr: "wanted to free 50 bytes, but freed 50 bytes space with errors in image deletion: remove image first",
		},
		{
			name:   "the maximum age removes images unused for longer whatever the usage",
			policy: withMaxAge(time.Hour), fs: belowHigh, running: 3 * time.Hour,
			images: []gcImage{
				{id: "unused-2h", size: 10, seen: 3 * time.Hour, used: 2 * time.Hour},
				{id: "unused-exactly-1h", size: 10, seen: 3 * time.Hour, used: time.Hour},
				{id: "unused-30m", size: 10, seen: 3 * time.Hour, used: 30 * time.Minute},
				{id: "never-used", size: 10, seen: 3 * time.Hour},
				{id: "in-use", size: 10, seen: 3 * time.Hour, used: 2 * time.Hour, inUse: true},
				{id: "pinned", size: 10, seen: 3 * time.Hour, pinned: true},
			},
			want: []string{"in-use", "pinned", "unused-30m", "unused-exactly-1h"},
		},
		{
			name:   "the maximum age waits until jetlet has run that long",
			policy: withMaxAge(time.Hour), fs: belowHigh, running: time.Hour,
			images: []gcImage{{id: "never-used", size: 10, seen: time.Hour}},
			want:   []string{"never-used"},
		},
		{
			name:   "the space is measured after the maximum age's removals, which it does not count",
			policy: withMaxAge(time.Hour), fs: atHigh, running: 3 * time.Hour,
			images: []gcImage{
				{id: "unused-2h", size: 50, seen: 3 * time.Hour, used: 2 * time.Hour},
				{id: "unused-30m", size: 50, seen: 3 * time.Hour, used: 30 * time.Minute},
			},
			want: nil,
		},
		{
			name:   "a disk of no capacity is an error and removes nothing",
			policy: DefaultPolicy(), fs: filesystemStats{}, running: time.Hour,
			images: []gcImage{{id: "unused", size: 10, seen: time.Hour}},
			want:   []string{"unused"}, wantErr: "invalid capacity 0 on image filesystem",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, rt, _ := newCollection(t, tt.policy, tt.images, tt.fs, tt.running)
			if tt.failing != "" {
				rt.removeErr[tt.failing] = errInjected
			}
			err := m.GarbageCollect(context.Background())
			if tt.wantErr == "" && err != nil {
				t.Fatalf("GarbageCollect: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("GarbageCollect: %v, want an error saying %q", err, tt.wantErr)
			}
			if got := rt.ids(); !slices.Equal(got, tt.want) {
				t.Fatalf("images left %v, want %v", got, tt.want)
			}
		})
	}
}

// DeleteUnusedImages frees every image neither in use, pinned nor too young,
// and says how many bytes.
func TestDeleteUnusedImages(t *testing.T) {
	m, rt, _ := newCollection(t, DefaultPolicy(), []gcImage{
		{id: "in-use", size: 100, seen: time.Hour, inUse: true},
		{id: "pinned", size: 100, seen: time.Hour, pinned: true},
		{id: "young", size: 100, seen: time.Minute},
		{id: "unused-a", size: 10, seen: time.Hour},
		{id: "unused-b", size: 20, seen: time.Hour, used: 30 * time.Minute},
	}, filesystemStats{capacity: 1000, available: 1000}, time.Hour)
	freed, err := m.DeleteUnusedImages(context.Background())
	if err != nil || freed != 30 {
		t.Fatalf("DeleteUnusedImages = %d, %v; want 30 bytes", freed, err)
	}
	if got, want := rt.ids(), []string{"in-use", "pinned", "young"}; !slices.Equal(got, want) {
		t.Fatalf("images left %v, want %v", got, want)
	}
}

// The records follow the runtime: an image's first detection is kept across
// passes, its last use is the last pass that saw a container of it, and an
// image gone from the runtime is forgotten.
func TestDetectImagesKeepsTheHistory(t *testing.T) {
	rt := newFakeRuntime()
	clock := &fakeClock{now: epoch}
	m, err := New(rt, Config{Policy: DefaultPolicy(), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	detect := func() {
		t.Helper()
		if _, err := m.detectImages(context.Background(), clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	rt.addImage("a", 10, false)
	rt.useImage("a")
	detect()
	clock.Advance(time.Minute)
	rt.addImage("b", 20, true)
	detect()
	t1 := clock.Now()
	rt.removeContainers()
	clock.Advance(time.Minute)
	detect()

	want := map[string]imageRecord{
		"a": {firstDetected: epoch, lastUsed: t1, size: 10},
		"b": {firstDetected: t1, size: 20, pinned: true},
	}
	if len(m.records) != len(want) {
		t.Fatalf("records %v, want %v", m.records, want)
	}
	for id, w := range want {
		if got := m.records[id]; got == nil || *got != w {
			t.Errorf("record of %s: %+v, want %+v", id, got, w)
		}
	}

	delete(rt.images, "a")
	detect()
	if _, ok := m.records["a"]; ok || len(m.records) != 1 {
		t.Fatalf("records after a is gone: %v, want only b", m.records)
	}

	rt.setListErr(errInjected)
	if _, err := m.detectImages(context.Background(), clock.Now()); !errors.Is(err, errInjected) {
		t.Fatalf("detectImages while the runtime cannot list: %v", err)
	}
}

func TestImagesInUse(t *testing.T) {
	tests := []struct {
		name      string
		container *runtimeapi.Container
		want      string
	}{
		{name: "the image id of a CRI 1.30 runtime", container: &runtimeapi.Container{ImageId: "sha256:aa", ImageRef: "docker.io/library/busybox@sha256:bb"}, want: "sha256:aa"},
		{name: "the image ref of an older runtime", container: &runtimeapi.Container{ImageRef: "sha256:aa"}, want: "sha256:aa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := imagesInUse([]*runtimeapi.Container{tt.container})
			if len(got) != 1 || !got[tt.want] {
				t.Fatalf("imagesInUse = %v, want only %s", got, tt.want)
			}
		})
	}
}

// Each detection forgets the pull records of the images the runtime no
// longer holds (kubelet's image GC prunes its image pull manager's), and
// keeps those of the images it holds.
func TestDetectImagesPrunesThePullRecordsOfGoneImages(t *testing.T) {
	dir := t.TempDir()
	pulls, err := pullmanager.New(pullmanager.Config{Dir: dir, Now: func() time.Time { return epoch.Add(-time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	creds := &pullmanager.ImagePullCredentials{NodePodsAccessible: true}
	pulls.RecordImagePulled("registry.example/kept:1", "kept", creds)
	pulls.RecordImagePulled("registry.example/gone:1", "gone", creds)
	rt := newFakeRuntime()
	rt.addImage("kept", 10, false)
	m, err := New(rt, Config{Policy: DefaultPolicy(), Clock: &fakeClock{now: epoch}, PullRecords: pulls})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.detectImages(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	// A pod without credentials may use an image pulled without any; one
	// whose record went must pull (AlwaysVerify: no record, no use).
	always, err := pullmanager.New(pullmanager.Config{Dir: dir, Policy: pullmanager.AlwaysVerify})
	if err != nil {
		t.Fatal(err)
	}
	if always.MustAttemptImagePull("registry.example/kept:1", "kept", func() []pullmanager.ImagePullSecret { return nil }) {
		t.Error("the record of an image the runtime holds is gone")
	}
	if !always.MustAttemptImagePull("registry.example/gone:1", "gone", func() []pullmanager.ImagePullSecret { return nil }) {
		t.Error("the record of an image the runtime no longer holds is kept")
	}
}
