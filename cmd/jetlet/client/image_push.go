package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/runtime/embedded/images"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/imageref"
)

type imagePushOptions struct {
	client  clientFlags
	timeout time.Duration
}

func newImagePushCommand() *cobra.Command {
	var o imagePushOptions
	cmd := &cobra.Command{
		Use:   "push REF FILE|-",
		Short: "Store an image archive (OCI image layout or docker save) in jetlet_images under REF, for every node to pull",
		Long: `Store the image of FILE (- reads standard input), an OCI image layout in a
tar (ctr images export, docker save of Docker 25 and later) or a docker save
archive, in the object store jetlet_images under REF, normalised as
containerd normalises it (busybox:1.36 is docker.io/library/busybox:1.36).
Each node serves the store read only on its loopback registry
(--image-registry-listen of jetlet run), through which containerd and the
embedded runtime pull REF with no registry (docs/containerd.md).

Each blob (layer, config, manifest) is stored once, named by its digest: a
layer that another image shares, or a second push of the same image, is not
sent again. An archive of several images is read for the one REF names.
Needs the scheduler's or the operator's NATS credentials.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0], args[1]) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "how long the push may take")
	cli.AnnotateEnv(fs)
	return cmd
}

func (o *imagePushOptions) run(cmd *cobra.Command, ref, file string) error {
	normalized, err := imageref.Normalize(ref)
	if err != nil {
		return fmt.Errorf("REF %q: %w", ref, err)
	}
	in := cmd.InOrStdin()
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	lookupCtx, cancelLookup := context.WithTimeout(ctx, o.client.connectWait)
	err = c.CheckImageStore(lookupCtx)
	cancelLookup()
	if err != nil {
		return err
	}
	archived, err := images.ReadArchive(in)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	img, err := pickImage(archived, normalized)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	res, err := c.PushImage(ctx, normalized, img.Image)
	if denied, ok := errors.AsType[*jc.DeniedError](err); ok {
		return fmt.Errorf("NATS at %s denied these credentials %s: pushing images needs the scheduler's or the operator's (jetlet nats-config)", c.URL(), denied.Permission.Subject)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "pushed %s %s (%s): %d blobs, %d stored (%s), %d already in %s\n",
		res.Ref, res.Digest, humanBytes(res.Size), res.Blobs, res.Stored, humanBytes(res.StoredBytes), res.Blobs-res.Stored, schemas.ObjectStoreImages)
	return nil
}

// pickImage is the image of archived that ref names, or the only one.
func pickImage(archived []images.Archived, ref string) (images.Archived, error) {
	for _, a := range archived {
		if slices.Contains(a.Refs, ref) {
			return a, nil
		}
		if at := strings.IndexByte(ref, '@'); at >= 0 {
			if d, err := a.Image.Digest(); err == nil && d.String() == ref[at+1:] {
				return a, nil
			}
		}
	}
	switch len(archived) {
	case 0:
		return images.Archived{}, errors.New("the archive holds no image")
	case 1:
		return archived[0], nil
	}
	var refs []string
	for _, a := range archived {
		refs = append(refs, a.Refs...)
	}
	return images.Archived{}, fmt.Errorf("the archive holds %d images (%s) and none is %s", len(archived), strings.Join(refs, ", "), ref)
}
