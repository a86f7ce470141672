package imagegc

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime is an in-memory ImageGCRuntime: images by id, containers,
// and failures to inject.
type fakeRuntime struct {
	mu         sync.Mutex // guards every field
	images     map[string]*runtimeapi.Image
	containers []*runtimeapi.Container
	mountpoint string
	// listErr fails ListImages; removeErr fails RemoveImage of an id.
	listErr   error
	removeErr map[string]error
}

var errInjected = errors.New("injected failure")

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{images: map[string]*runtimeapi.Image{}, removeErr: map[string]error{}, mountpoint: "/var/lib/images"}
}

func (f *fakeRuntime) addImage(id string, size uint64, pinned bool, names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[id] = &runtimeapi.Image{Id: id, Size: size, Pinned: pinned, RepoTags: names}
}

// useImage adds an exited container of the image: kubelet counts every
// container's image as in use, running or not.
func (f *fakeRuntime) useImage(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers = append(f.containers, &runtimeapi.Container{
		Id: "c-" + id, ImageId: id, ImageRef: id, State: runtimeapi.ContainerState_CONTAINER_EXITED,
	})
}

func (f *fakeRuntime) removeContainers() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers = nil
}

func (f *fakeRuntime) setListErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listErr = err
}

// ids is the ids of the images the runtime holds, sorted.
func (f *fakeRuntime) ids() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id := range f.images {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (f *fakeRuntime) ListImages(_ context.Context, _ *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listErr != nil {
		return nil, f.listErr
	}
	var out []*runtimeapi.Image
	for _, im := range f.images {
		out = append(out, &runtimeapi.Image{Id: im.Id, Size: im.Size, Pinned: im.Pinned, RepoTags: im.RepoTags, RepoDigests: im.RepoDigests})
	}
	return out, nil
}

func (f *fakeRuntime) RemoveImage(_ context.Context, image *runtimeapi.ImageSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.removeErr[image.GetImage()]; err != nil {
		return err
	}
	delete(f.images, image.GetImage())
	return nil
}

func (f *fakeRuntime) ImageFsInfo(_ context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{
		FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: f.mountpoint},
	}}}, nil
}

func (f *fakeRuntime) ListContainers(_ context.Context, _ *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.containers), nil
}

// fakeClock is a clock the test moves; one goroutine uses it.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }
