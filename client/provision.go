package client

import (
	"context"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas/natsjs"
)

// ProvisionAPI is the prefix of the JetStream API calls that create and
// update streams (a bucket is a stream), which only the operator may make.
const ProvisionAPI = "$JS.API.STREAM"

// Provision creates or updates the fleet's streams, buckets and object
// store as cfg says, as `jetlet run` does at its start; log gets its
// warnings. It takes the operator's credentials: a refusal is a
// *DeniedError.
func (c *Client) Provision(ctx context.Context, cfg natsjs.StreamsConfig, log zerolog.Logger) error {
	watchCtx, stop := c.denied.Watch(ctx, ProvisionAPI)
	defer stop()
	err := natsjs.Provision(watchCtx, c.js, cfg, log)
	if denied, ok := c.deniedError(watchCtx, "provision", ""); ok {
		return denied
	}
	return err
}
