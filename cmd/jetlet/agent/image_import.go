package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/runtime/embedded"
)

// serveImageImport serves `jetlet image import` for the embedded runtime on
// <data-dir>/image-import.sock, until ctx ends: POST /import with an image
// archive as the body answers the images it held (cli.ImportedImage) or an
// error as text. The socket is the node user's only (0600), as the data dir
// is; the import writes into the store of the running runtime, its one
// writer.
func (a *agent) serveImageImport(ctx context.Context, rt *embedded.Runtime) error {
	sock, err := filepath.Abs(filepath.Join(a.cfg.dataDir, cli.ImageImportSocket))
	if err != nil {
		return err
	}
	_ = os.Remove(sock) // the data dir is locked: a socket there is a dead jetlet's
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("image import socket: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		lis.Close()
		return fmt.Errorf("image import socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /import", func(w http.ResponseWriter, r *http.Request) {
		imported, err := rt.ImportImages(r.Context(), r.Body)
		if err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, embedded.ErrNoImageStore) {
				code = http.StatusConflict
			}
			http.Error(w, err.Error(), code)
			return
		}
		out := make([]cli.ImportedImage, 0, len(imported))
		for _, im := range imported {
			out = append(out, cli.ImportedImage{ID: im.ID, RepoTags: im.RepoTags, Size: im.Size})
			a.log.Info().Str("image", im.ID).Strs("tags", im.RepoTags).Msg("image imported")
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error().Err(err).Msg("image import socket stopped")
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return nil
}
