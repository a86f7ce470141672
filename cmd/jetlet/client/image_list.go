package client

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/schemas/natsjs/registry"
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
	defer c.close()
	ctx := cmd.Context()
	if _, err := c.imageStore(ctx); err != nil {
		return err
	}
	images, err := c.images(ctx)
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if o.output != outputTable {
		return printList(w, o.output, "ImageList", images)
	}
	if len(images) == 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "No images in %s at %s.\n", schemas.ObjectStoreImages, c.url)
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

// images reads the references of jetlet_images from its meta subjects,
// the last of each, sorted.
func (c *client) images(ctx context.Context) ([]registry.Image, error) {
	var out []registry.Image
	cfg := jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"$O." + schemas.ObjectStoreImages + ".M.>"},
		DeliverPolicy:  jetstream.DeliverLastPerSubjectPolicy,
	}
	err := c.readStream(ctx, natsjs.ObjectStoreStream(schemas.ObjectStoreImages), cfg, false, func(msg jetstream.Msg) error {
		md, err := msg.Metadata()
		if err != nil {
			return err
		}
		if im, ok := registry.ImageFromMetaMessage(msg.Data(), md.Timestamp); ok {
			out = append(out, im)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b registry.Image) int { return strings.Compare(a.Ref, b.Ref) })
	return out, nil
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
