package client

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

type imageListOptions struct {
	client clientFlags
	output string
}

func newImageListCommand() *cobra.Command {
	var o imageListOptions
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the references jetlet_images holds: reference, manifest digest, size",
		Long: `List the references the object store jetlet_images holds, sorted: each
one's manifest digest, its size (the bytes a pull moves: manifest, config and
layers) and when it was pushed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.StringVarP(&o.output, "output", "o", "", "json or yaml")
	completeOutput(cmd, outputJSON, outputYAML)
	cli.AnnotateEnv(fs)
	return cmd
}

func (o *imageListOptions) run(cmd *cobra.Command) error {
	if err := checkOutput(o.output, outputJSON, outputYAML); err != nil {
		return err
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	images, err := c.Images(ctx)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if o.output != outputTable {
		return printList(w, o.output, "ImageList", images)
	}
	if len(images) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "No images in %s at %s.\n", schemas.ObjectStoreImages, c.URL())
		return nil
	}
	table := newTable(w)
	writeRow(table, "REF", "DIGEST", "SIZE", "PUSHED")
	now := time.Now()
	for _, im := range images {
		writeRow(table, im.Ref, im.Digest, humanBytes(im.Size), ageSince(im.Pushed, now))
	}
	return table.Flush()
}

// humanBytes is n in the decimal units of docker images: 4.3MB, 812.0kB.
func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, suffix := float64(n), "kMGTPE"
	i := -1
	for v >= unit && i < len(suffix)-1 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f%cB", v, suffix[i])
}
