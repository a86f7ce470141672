package client

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

// deleteConfigFlags are the flags of delete configmap and delete secret.
type deleteConfigFlags struct {
	client         clientFlags
	namespace      string
	ignoreNotFound bool
	timeout        time.Duration
}

func (f *deleteConfigFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	f.client.register(fs)
	fs.StringVarP(&f.namespace, "namespace", "n", "default", "the namespace of NAME (NAMESPACE/NAME names its own)")
	fs.BoolVar(&f.ignoreNotFound, "ignore-not-found", false, "exit 0 when it does not exist")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for NATS")
	cli.AnnotateEnv(fs)
}

// run connects and calls del with the object's namespace and name; a
// notFoundError is a note on stderr with --ignore-not-found.
func (f *deleteConfigFlags) run(cmd *cobra.Command, kind, arg string, del func(ctx context.Context, c *jc.Client, ns, name string) error) error {
	ns, name, err := objectRef(kind, arg, f.namespace)
	if err != nil {
		return err
	}
	c, err := connectClient(cmd, &f.client)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	err = del(ctx, c, ns, name)
	if f.ignoreNotFound && isNotFound(err) {
		fmt.Fprintln(cmd.ErrOrStderr(), err.Error())
		return nil
	}
	return err
}

func newDeleteConfigMapCommand() *cobra.Command {
	var f deleteConfigFlags
	cmd := &cobra.Command{
		Use:     "configmap NAMESPACE/NAME",
		Aliases: []string{"configmaps", "cm"},
		Short:   "Delete a ConfigMap from jetlet_configmaps",
		Long: `Delete a ConfigMap from jetlet_configmaps (a delete marker: the nodes'
watches see it go; the pods that mount it keep their files, as kubelet's).`,
		Example: `  jetlet delete configmap default/app-config`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, kindConfigMap, args[0], func(ctx context.Context, c *jc.Client, ns, name string) error {
				if err := c.DeleteConfigMap(ctx, ns, name); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), configLabel(kindConfigMap, ns, name)+" deleted")
				return nil
			})
		},
	}
	f.register(cmd)
	return cmd
}

func newDeleteSecretCommand() *cobra.Command {
	var f deleteConfigFlags
	cmd := &cobra.Command{
		Use:     "secret NAMESPACE/NAME [--node N]",
		Aliases: []string{"secrets"},
		Short:   "Delete a Secret from jetlet_secrets: its copy for --node, else every node's",
		Long: `Delete a Secret from jetlet_secrets: the copy sealed for --node, else the
copy of every node it is sealed for. Each is purged (no earlier revision of
its ciphertext is kept in the bucket).`,
		Example: `  jetlet delete secret default/db
  jetlet delete secret default/db --node n2`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, kindSecret, args[0], func(ctx context.Context, c *jc.Client, ns, name string) error {
				copies, err := c.SealedSecrets(ctx, nodeToken(f.client.node)+"."+objectKey(ns, name))
				if err != nil {
					return err
				}
				if len(copies) == 0 {
					where := "on any node"
					if f.client.node != "" {
						where = "on node " + f.client.node
					}
					return &jc.NotFoundError{Msg: fmt.Sprintf("secret %s/%s not found %s in %s", ns, name, where, schemas.BucketSecrets)}
				}
				for _, s := range copies {
					if err := c.PurgeSecret(ctx, s); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "%s deleted on node %s\n", configLabel(kindSecret, ns, name), s.Node)
				}
				return nil
			})
		},
	}
	f.register(cmd)
	return cmd
}
