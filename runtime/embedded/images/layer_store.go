package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sync/errgroup"
)

// ensureLayers unpacks the layers (diffIDs[i] is layers[i]'s) that the
// store lacks, layerJobs at a time. The caller has pended them.
func (s *Store) ensureLayers(ctx context.Context, diffIDs []string, layers []v1.Layer) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(layerJobs)
	for i, l := range layers {
		g.Go(func() error {
			return s.ensureLayer(gctx, diffIDs[i], l.Uncompressed)
		})
	}
	return g.Wait()
}

// ensureLayer unpacks the layer diffID from the uncompressed tar open
// gives, unless it is unpacked already. Callers needing one layer at once
// share one unpack.
func (s *Store) ensureLayer(ctx context.Context, diffID string, open func() (io.ReadCloser, error)) error {
	_, err := s.unpacks.do(ctx, diffID, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, s.unpackLayer(ctx, diffID, open)
	})
	if err != nil {
		return fmt.Errorf("layer %s: %w", diffID, err)
	}
	return nil
}

// unpackLayer unpacks the layer into a temporary directory beside its
// place, checks that the uncompressed stream's sha256 is diffID, and only
// then renames it into place: a crash never leaves a half layer under a
// layer's name.
func (s *Store) unpackLayer(ctx context.Context, diffID string, open func() (io.ReadCloser, error)) (err error) {
	dir := s.layerDir(diffID)
	if _, err := os.Lstat(dir); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	hexID := strings.TrimPrefix(diffID, "sha256:")
	tmp, err := os.MkdirTemp(s.layersDir, ".tmp-"+hexID[:12]+"-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if rerr := os.RemoveAll(tmp); rerr != nil {
				s.log.Error().Err(rerr).Str("dir", tmp).Msg("remove a failed unpack")
			}
		}
	}()
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	h := sha256.New()
	tee := io.TeeReader(&ctxReader{ctx: ctx, r: rc}, h)
	if err := extractLayer(tmp, tee); err != nil {
		return err
	}
	// The tar's end may leave padding unread; the digest covers it all.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fmt.Errorf("read layer: %w", err)
	}
	if err := rc.Close(); err != nil {
		return fmt.Errorf("read layer: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != hexID {
		return fmt.Errorf("content is sha256:%s, not the diff id the config gives", got)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	if d, err := os.Open(s.layersDir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	s.log.Debug().Str("layer", diffID).Msg("layer unpacked")
	return nil
}

// ctxReader fails its reads once ctx is done: an import reading a local
// file stops when its caller gives up, as a pull's HTTP body does.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
