package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

type provisionOptions struct {
	client  clientFlags
	streams natsjs.StreamsConfig
	timeout time.Duration
}

func newProvisionCommand() *cobra.Command {
	var o provisionOptions
	cmd := &cobra.Command{
		Use:   "provision",
		Short: "Create or update jetlet's streams, buckets and object store (with operator credentials)",
		Long: `Create the streams, buckets and object store of docs/contract.md section 2, or update the
ones whose settings differ, as ` + "`jetlet run`" + ` does at start. Where the nodes'
NATS credentials may not create streams (the permissions of jetlet
nats-config), run it once with the operator's, with the same settings as the
nodes (--replicas, --max-age, ...); the nodes then check that they exist.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fs := cmd.Flags()
	o.client.register(fs)
	cli.RegisterStreamFlags(fs, &o.streams)
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long to wait for NATS")
	cli.AnnotateEnv(fs)
	return cmd
}

func (o *provisionOptions) run(cmd *cobra.Command) error {
	o.streams.SubjectPrefix = o.client.subjectPrefix
	o.streams.SetDefaults()
	if err := o.streams.Validate(); err != nil {
		return err
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	err = c.Provision(ctx, o.streams, zerolog.New(cmd.ErrOrStderr()).Level(zerolog.WarnLevel))
	if denied, ok := errors.AsType[*jc.DeniedError](err); ok {
		return fmt.Errorf("NATS at %s denied these credentials %s: provisioning needs the operator's (the operator user of `jetlet nats-config`)", c.URL(), denied.Permission.Subject)
	}
	if err != nil {
		return err
	}
	var names []string
	for _, sc := range o.streams.StreamConfigs() {
		names = append(names, sc.Name)
	}
	for _, kc := range o.streams.BucketConfigs() {
		names = append(names, kc.Bucket)
	}
	for _, oc := range o.streams.ObjectStoreConfigs() {
		names = append(names, oc.Bucket)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "provisioned at %s: %s\n", c.URL(), strings.Join(names, ", "))
	return nil
}
