package agent

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas/natsjs/registry"
)

// listenImageRegistry binds --image-registry-listen, before the runtime
// starts, so that the embedded runtime can be told the address (imageMirror).
// nil when it is empty. The default address taken by another process (most
// often another jetlet on the host, which serves the same store when it
// shares the NATS) is logged at info and not served: several nodes on one
// host is a set-up of tests and development. An address given explicitly
// (the flag, JETLET_IMAGE_REGISTRY_LISTEN, as deploy/systemd/jetlet.env
// does) must be served: a node that cannot is not started.
func (a *agent) listenImageRegistry() (*registry.Server, error) {
	if a.cfg.imageRegistryListen == "" {
		return nil, nil
	}
	srv, err := registry.Listen(registry.Config{
		Listen: a.cfg.imageRegistryListen,
		Logger: logger.With().Str("component", "image-registry").Str("node", a.cfg.node).Logger(),
	})
	if err != nil && !a.cfg.imageRegistryListenSet {
		a.log.Info().Err(err).Str("listen", a.cfg.imageRegistryListen).
			Msg("the default --image-registry-listen is taken (another jetlet on this host?): this node does not serve the images of the bus; give it an address of its own to")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--image-registry-listen: %w", err)
	}
	return srv, nil
}

// imageMirror is the address of the node's registry, host:port, for the
// embedded runtime's ImageMirror; "" when it is not served.
func (a *agent) imageMirror() string {
	if a.imageRegistry == nil {
		return ""
	}
	return a.imageRegistry.Addr()
}

// serveImageRegistry serves the registry, if it is bound, until ctx is done.
func (a *agent) serveImageRegistry(ctx context.Context, js jetstream.JetStream) {
	if a.imageRegistry == nil {
		return
	}
	if err := a.imageRegistry.Serve(ctx, js); err != nil {
		a.log.Error().Err(err).Str("address", a.imageRegistry.Addr()).Msg("the images of the bus are not served")
	}
}
