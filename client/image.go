package client

import (
	"context"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/schemas/natsjs/registry"
)

// imageStore opens jetlet_images, explaining its absence.
func (c *Client) imageStore(ctx context.Context) (jetstream.ObjectStore, error) {
	store, err := c.js.ObjectStore(ctx, schemas.ObjectStoreImages)
	if err != nil {
		return nil, c.jsError("object store "+schemas.ObjectStoreImages, err)
	}
	return store, nil
}

// CheckImageStore says whether jetlet_images is there (ErrNotFound when
// not), before a long read of an archive to push.
func (c *Client) CheckImageStore(ctx context.Context) error {
	_, err := c.imageStore(ctx)
	return err
}

// PushImage stores img under ref (normalized) in jetlet_images, where every
// node's registry finds it: the blobs the store lacks, then the manifest.
func (c *Client) PushImage(ctx context.Context, ref string, img v1.Image) (registry.PushResult, error) {
	store, err := c.imageStore(ctx)
	if err != nil {
		return registry.PushResult{}, err
	}
	// A denied publish is never answered: the push would wait for its
	// timeout.
	ctx, stopObjects := c.denied.Watch(ctx, "$O."+schemas.ObjectStoreImages)
	defer stopObjects()
	ctx, stopPurge := c.denied.Watch(ctx, "$JS.API.STREAM.PURGE."+natsjs.ObjectStoreStream(schemas.ObjectStoreImages))
	defer stopPurge()
	res, err := registry.Push(ctx, store, ref, img)
	if denied, ok := c.deniedError(ctx, "push "+ref, ""); ok {
		return res, denied
	}
	return res, err
}

// Images reads the references of jetlet_images from its meta subjects,
// the last of each, sorted.
func (c *Client) Images(ctx context.Context) ([]registry.Image, error) {
	if _, err := c.imageStore(ctx); err != nil {
		return nil, err
	}
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
