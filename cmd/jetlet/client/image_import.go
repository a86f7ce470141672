package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/runtime/embedded/images"
)

// newImageImportCommand is `jetlet image import FILE|-`: an OCI image-layout
// or `docker save` archive loaded into the embedded runtime of the `jetlet
// run` serving --data-dir, through its image-import socket, as `ctr images
// import` loads one into containerd; and `jetlet image import ROOT REF`: an
// image of one layer made of the directory ROOT, named REF, as `docker
// import` makes one of a tarball. It needs no registry and no NATS.
func newImageImportCommand() *cobra.Command {
	var dataDir string
	var changes []string
	cmd := &cobra.Command{
		Use:   "import FILE|- | import ROOT-DIR REF [--change INSTRUCTION]...",
		Short: "Load an OCI image layout or docker-save archive, or a root directory as an image, into this node's embedded runtime",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = cmd.InOrStdin()
			if len(args) == 2 {
				archive, err := images.RootArchive(args[0], args[1], changes)
				if err != nil {
					return err
				}
				defer archive.Close()
				in = archive
			} else if len(changes) > 0 {
				return errors.New("--change goes with ROOT-DIR REF, not with an archive")
			} else if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			imported, err := importImages(cmd.Context(), dataDir, in)
			if err != nil {
				return err
			}
			for _, im := range imported {
				name := strings.Join(im.RepoTags, ", ")
				if name == "" {
					name = "(no name)"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", im.ID, name)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "./jetlet-data", "data dir of the `jetlet run` whose embedded runtime takes the images")
	cmd.Flags().StringArrayVarP(&changes, "change", "c", nil, "with ROOT-DIR REF, an instruction for the image's config, as docker import's: CMD, ENTRYPOINT, ENV, WORKDIR, USER")
	return cmd
}

// importImages posts the archive to the image-import socket of the jetlet
// run serving dataDir.
func importImages(ctx context.Context, dataDir string, archive io.Reader) ([]cli.ImportedImage, error) {
	sock, err := filepath.Abs(filepath.Join(dataDir, cli.ImageImportSocket))
	if err != nil {
		return nil, err
	}
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://jetlet/import", archive)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) || isConnRefused(err) {
			return nil, fmt.Errorf("no `jetlet run` with the embedded runtime answers at %s (%v): start it on --data-dir %s first, as root", sock, err, dataDir)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, fmt.Errorf("import refused: %s", strings.TrimSpace(string(msg)))
	}
	var out []cli.ImportedImage
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("import: the node's answer: %w", err)
	}
	return out, nil
}

func isConnRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "connection refused")
}
