package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime/embedded/images"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

// containerImages is what a container of a runtime with an image store takes
// from images, copied into its record at create: the image may be removed
// while the container lives, and its layers stay until the container is
// removed (images.Store.Hold, one holder per image).
type containerImages struct {
	// Root is the container's image: its layers, config and users.
	Root *images.Image `json:"root"`
	// Volumes are the image volumes' images by container path.
	Volumes map[string]*images.Image `json:"volumes,omitempty"`
}

// holders are the names the container holds its images under.
func (ci *containerImages) holders(containerID string) []string {
	out := []string{containerID}
	for path := range ci.Volumes {
		out = append(out, containerID+":"+path)
	}
	return out
}

// holdImages resolves and holds the images a container of config cfg uses:
// its own and those of its image volumes. On error nothing stays held.
func (r *Runtime) holdImages(containerID string, cfg *runtimeapi.ContainerConfig) (*containerImages, error) {
	ci := &containerImages{}
	im, err := r.storedImage(cfg.GetImage().GetImage())
	if err == nil {
		ci.Root, err = r.store.Hold(containerID, im.ID)
	}
	if err != nil {
		return nil, err
	}
	for _, m := range cfg.GetMounts() {
		if m.GetImage().GetImage() == "" {
			continue
		}
		path := filepath.Clean(m.GetContainerPath())
		im, err := r.imageVolume(m)
		if err == nil {
			im, err = r.store.Hold(containerID+":"+path, im.ID)
		}
		if err != nil {
			r.releaseImages(containerID, ci)
			return nil, fmt.Errorf("image volume %s: %w", path, err)
		}
		if ci.Volumes == nil {
			ci.Volumes = map[string]*images.Image{}
		}
		ci.Volumes[path] = im
	}
	return ci, nil
}

// storedImage is the pulled image ref names.
func (r *Runtime) storedImage(ref string) (*images.Image, error) {
	im := r.store.Lookup(ref)
	if im == nil {
		return nil, fmt.Errorf("image %q not found: pull it first", ref)
	}
	return im, nil
}

// imageVolume is the image of an image volume, which must be read only (it
// is mounted so; a read-write one is refused, as kubelet and containerd
// refuse it) and have the sub path it names.
func (r *Runtime) imageVolume(m *runtimeapi.Mount) (*images.Image, error) {
	if !m.GetReadonly() {
		return nil, errors.New("an image volume must be read only")
	}
	im, err := r.storedImage(m.GetImage().GetImage())
	if err != nil {
		return nil, err
	}
	if sub := m.GetImageSubPath(); sub != "" {
		ok, err := r.store.Exists(im, "/"+sub)
		if err == nil && !ok {
			err = fmt.Errorf("sub path %q does not exist in image %s", sub, m.GetImage().GetImage())
		}
		if err != nil {
			return nil, err
		}
	}
	return im, nil
}

// releaseImages lets go of what holdImages held for the container.
func (r *Runtime) releaseImages(containerID string, ci *containerImages) {
	if ci == nil || r.store == nil {
		return
	}
	for _, h := range ci.holders(containerID) {
		if err := r.store.Release(h); err != nil {
			r.log.Warn().Err(err).Str("container", containerID).Str("holder", h).Msg("release an image")
		}
	}
}

// processArgs is the container's argv from its config and its image's, by
// Kubernetes' rules (as containerd applies them): a command replaces the
// entrypoint and drops the image's Cmd; args alone replace the Cmd.
func processArgs(cfg *runtimeapi.ContainerConfig, im images.Config) ([]string, error) {
	command, args := cfg.GetCommand(), cfg.GetArgs()
	if len(command) == 0 {
		if len(args) == 0 {
			args = im.Cmd
		}
		if !(len(im.Entrypoint) == 1 && im.Entrypoint[0] == "") {
			command = im.Entrypoint
		}
	}
	argv := append(append([]string{}, command...), args...)
	if len(argv) == 0 {
		return nil, errors.New("no command specified: the image has no entrypoint or cmd, and the container sets none")
	}
	return argv, nil
}

// imageUsers reads the image's /etc/passwd and /etc/group (a missing file
// holds no one).
func (r *Runtime) imageUsers(im *images.Image) userDB {
	return func(name string) ([]byte, error) {
		data, err := r.store.ReadFile(im, "/etc/"+name)
		if errors.Is(err, images.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return data, err
	}
}

// hostUsers reads the passwd and group files of the host directory etc.
func hostUsers(etc string) userDB {
	return func(name string) ([]byte, error) {
		data, err := os.ReadFile(filepath.Join(etc, name))
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return data, err
	}
}

// imageRootfs is the container's root: its image's layers under its own
// upper dir.
func (r *Runtime) imageRootfs(c *container) *shim.Rootfs {
	return &shim.Rootfs{
		Layers: r.store.LayerDirs(c.images.Root),
		Upper:  filepath.Join(c.dir, "upper"),
		Work:   filepath.Join(c.dir, "work"),
		Copy:   r.copyRoots,
	}
}

// imageVolumeLayers returns the layer dirs of the image volume at a
// container path, for containerMounts.
func (r *Runtime) imageVolumeLayers(ci *containerImages) func(path string) ([]string, error) {
	return func(path string) ([]string, error) {
		im := ci.Volumes[path]
		if im == nil {
			return nil, fmt.Errorf("image volume %s was not resolved at create", path)
		}
		return r.store.LayerDirs(im), nil
	}
}

// hasEnv reports whether env sets name.
func hasEnv(env []string, name string) bool {
	return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}
