package agent

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/runtime/busregistry"
)

// listenImageRegistry binds --image-registry-listen, before the runtime
// starts, so that the embedded runtime can be told the address (imageMirror).
// nil when it is empty. The default address taken by another process (a
// second jetlet on the host) is logged and not served; an address given
// explicitly must be served.
func (a *agent) listenImageRegistry() (*busregistry.Server, error) {
	if a.cfg.imageRegistryListen == "" {
		return nil, nil
	}
	srv, err := busregistry.Listen(busregistry.Config{
		Listen: a.cfg.imageRegistryListen,
		Logger: logger.With().Str("component", "image-registry").Str("node", a.cfg.node).Logger(),
	})
	if err != nil && !a.cfg.imageRegistryListenSet {
		a.log.Error().Err(err).Str("listen", a.cfg.imageRegistryListen).
			Msg("the images of the bus are not served on the default --image-registry-listen; give the node an address of its own")
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
