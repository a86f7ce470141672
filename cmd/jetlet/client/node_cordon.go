package client

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

type nodeCordonOptions struct {
	client        clientFlags
	unschedulable bool
}

// newNodeCordonCommand is `node cordon` (unschedulable) or `node uncordon`.
func newNodeCordonCommand(unschedulable bool) *cobra.Command {
	o := nodeCordonOptions{unschedulable: unschedulable}
	cmd := &cobra.Command{
		Use:   "cordon NAME",
		Short: "Mark a node unschedulable: it refuses new pods, its pods run on",
		Long: `Ask the node, over its node service, to refuse every new pod at admission
(Rejected, reason NodeUnschedulable) unless the pod tolerates
node.kubernetes.io/unschedulable:NoSchedule, as kubectl cordon makes a node
refuse them. Its pods, and new intents for them, go on. The node keeps the
cordon in its data dir across restarts and shows it in its record:
get nodes says SchedulingDisabled. The node must be live. Needs the
operator's NATS credentials.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	if !unschedulable {
		cmd.Use = "uncordon NAME"
		cmd.Short = "Mark a node schedulable again"
		cmd.Long = `Ask the node, over its node service, to admit new pods again (jetlet node
cordon undone). The node must be live. Needs the operator's NATS credentials.`
	}
	o.client.register(cmd.Flags())
	cli.AnnotateEnv(cmd.Flags())
	return cmd
}

func (o *nodeCordonOptions) run(cmd *cobra.Command, name string) error {
	if !schemas.ValidNodeName(name) {
		return fmt.Errorf("%q is not a node name (a DNS-1123 label)", name)
	}
	c, err := connectClient(cmd, &o.client)
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.Cordon(cmd.Context(), name, o.unschedulable)
	if err != nil {
		return err
	}
	verb := "cordoned"
	if !resp.Unschedulable {
		verb = "uncordoned"
	}
	if !resp.Changed {
		verb = "already " + verb
	}
	fmt.Fprintf(cmd.OutOrStdout(), "node/%s %s\n", resp.Node, verb)
	return nil
}
