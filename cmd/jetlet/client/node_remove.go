package client

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

type nodeRemoveOptions struct{ client clientFlags }

func newNodeRemoveCommand() *cobra.Command {
	var o nodeRemoveOptions
	cmd := &cobra.Command{
		Use:   "remove NAME",
		Short: "Delete a retired node's durable consumer, its jetlet_status keys and its jetlet_nodes record",
		Long: `Delete what a node that will not come back leaves on the server: its
durable consumer on JETLET_INTENTS (and the read-back consumers named after
it), its pods' statuses in jetlet_status and its record in jetlet_nodes.
Its intents, results and events stay. Refused while the node's heartbeat is
fresh: stop its jetlet first. Needs the operator's NATS credentials.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	o.client.register(cmd.Flags())
	cli.AnnotateEnv(cmd.Flags())
	return cmd
}

func (o *nodeRemoveOptions) run(cmd *cobra.Command, name string) error {
	if !schemas.ValidNodeName(name) {
		return fmt.Errorf("%q is not a node name (a DNS-1123 label)", name)
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	removed, err := c.RemoveNode(cmd.Context(), name)
	if err != nil {
		return err
	}
	slices.Sort(removed)
	fmt.Fprintf(cmd.OutOrStdout(), "node %s removed: %s\n", name, strings.Join(removed, ", "))
	return nil
}
