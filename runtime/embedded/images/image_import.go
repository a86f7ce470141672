package images

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jetlet/jetlet/schemas/imageref"
)

// Import stores the images of an OCI image-layout tar or a `docker save`
// tar (see ReadArchive), each under the names the archive gives it; an
// image without a name is stored by id only. The archive is spooled into
// the store's directory (unlinked) while it is read. An OCI layout's names
// get RepoDigests "<repo>@<manifest digest>" as containerd records them;
// a `docker save` archive records no manifest, so its images get none.
//
// The images are stored one by one: when one fails, those before it stay
// stored.
func (s *Store) Import(ctx context.Context, r io.Reader) ([]*Image, error) {
	a, err := readArchive(ctx, r, s.dir)
	if err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	defer a.Close()
	var out []*Image
	seen := make(map[string]bool)
	for _, ai := range a.images {
		names := ai.Refs
		if ai.digest.Hex != "" {
			for _, n := range ai.Refs {
				if r, err := imageref.Parse(n); err == nil && r.Tag != "" {
					names = append(names, r.Repo()+"@"+ai.digest.String())
				}
			}
		}
		im, err := s.store(ctx, ai.Image, ai.size, names)
		if err != nil {
			what := "an unnamed image"
			if len(ai.Refs) > 0 {
				what = strings.Join(ai.Refs, ", ")
			}
			return nil, fmt.Errorf("import %s: %w", what, err)
		}
		s.log.Info().Str("id", im.ID).Strs("names", ai.Refs).Msg("image imported")
		if !seen[im.ID] {
			seen[im.ID] = true
			out = append(out, im)
		}
	}
	// An image named twice in the archive is returned once, with all its
	// names.
	for i, im := range out {
		if c := s.Lookup(im.ID); c != nil {
			out[i] = c
		}
	}
	return out, nil
}
