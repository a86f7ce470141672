package images

import (
	"maps"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Image is a stored image. The store hands out copies: a caller may keep
// and change one without locking.
type Image struct {
	// ID is "sha256:<config digest hex>", as containerd's image id.
	ID string `json:"id"`
	// RepoTags are the normalised references with a tag naming the image.
	RepoTags []string `json:"repo_tags,omitempty"`
	// RepoDigests are "<repo>@sha256:<manifest digest>": the digest the
	// reference resolved to (an index's when the tag names one).
	RepoDigests []string `json:"repo_digests,omitempty"`
	// Size is the compressed size of the config and layers, as containerd
	// reports it.
	Size uint64 `json:"size"`
	// Layers are the diff ids ("sha256:<hex>"), bottom first.
	Layers []string `json:"layers"`
	Config Config   `json:"config"`
	// Pinned is set when a name of the image is one of Options.Pinned; it
	// is computed, not stored.
	Pinned bool `json:"-"`
}

// Config is what a container takes from its image's config.
type Config struct {
	Entrypoint []string          `json:"entrypoint,omitempty"`
	Cmd        []string          `json:"cmd,omitempty"`
	Env        []string          `json:"env,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	User       string            `json:"user,omitempty"`
	StopSignal string            `json:"stop_signal,omitempty"`
	Volumes    []string          `json:"volumes,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

func (im *Image) clone() *Image {
	c := *im
	c.RepoTags = slices.Clone(im.RepoTags)
	c.RepoDigests = slices.Clone(im.RepoDigests)
	c.Layers = slices.Clone(im.Layers)
	c.Config = im.Config.clone()
	return &c
}

func (c Config) clone() Config {
	c.Entrypoint = slices.Clone(c.Entrypoint)
	c.Cmd = slices.Clone(c.Cmd)
	c.Env = slices.Clone(c.Env)
	c.Volumes = slices.Clone(c.Volumes)
	c.Labels = maps.Clone(c.Labels)
	return c
}

// configOf is the part of an image config file a container uses.
func configOf(cf *v1.ConfigFile) Config {
	c := cf.Config
	return Config{
		Entrypoint: c.Entrypoint,
		Cmd:        c.Cmd,
		Env:        c.Env,
		WorkingDir: c.WorkingDir,
		User:       c.User,
		StopSignal: c.StopSignal,
		Volumes:    slices.Sorted(maps.Keys(c.Volumes)),
		Labels:     c.Labels,
	}
}

// hasName reports whether ref is one of the image's tags or digests.
func (im *Image) hasName(ref string) bool {
	return slices.Contains(im.RepoTags, ref) || slices.Contains(im.RepoDigests, ref)
}

// addName adds a normalised reference to the tags or the digests.
func (im *Image) addName(ref string) {
	if im.hasName(ref) {
		return
	}
	if strings.Contains(ref, "@") {
		im.RepoDigests = append(im.RepoDigests, ref)
		slices.Sort(im.RepoDigests)
	} else {
		im.RepoTags = append(im.RepoTags, ref)
		slices.Sort(im.RepoTags)
	}
}

// dropName removes ref from the tags and digests.
func (im *Image) dropName(ref string) {
	im.RepoTags = slices.DeleteFunc(im.RepoTags, func(s string) bool { return s == ref })
	im.RepoDigests = slices.DeleteFunc(im.RepoDigests, func(s string) bool { return s == ref })
}
