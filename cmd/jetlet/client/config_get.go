package client

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

// getConfigsFlags are the flags of get configmaps and get secrets.
type getConfigsFlags struct {
	client        clientFlags
	output        string
	namespace     string
	allNamespaces bool
}

func (f *getConfigsFlags) register(cmd *cobra.Command, what string) {
	fs := cmd.Flags()
	f.client.register(fs)
	fs.StringVarP(&f.output, "output", "o", "", "json or yaml")
	fs.StringVarP(&f.namespace, "namespace", "n", "default", "the namespace to list")
	fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "list the "+what+" of every namespace")
	completeOutput(cmd, outputJSON, outputYAML)
	cli.AnnotateEnv(fs)
}

func (f *getConfigsFlags) validate(cmd *cobra.Command) error {
	if err := checkOutput(f.output, outputJSON, outputYAML); err != nil {
		return err
	}
	if f.allNamespaces && cmd.Flags().Changed("namespace") {
		return fmt.Errorf("give -n NAMESPACE or -A, not both")
	}
	return nil
}

// connect validates the flags and connects; name is the NAME argument, if
// any.
func (f *getConfigsFlags) connect(cmd *cobra.Command, args []string) (c *jc.Client, name string, err error) {
	if err := f.validate(cmd); err != nil {
		return nil, "", err
	}
	if len(args) == 1 {
		name = args[0]
	}
	c, err = connectClient(cmd, &f.client)
	return c, name, err
}

// keyPattern is the filter of the keys to list: one namespace's, or every
// one's, and the name's when one is given (a name may hold dots: every
// token after the namespace's).
func (f *getConfigsFlags) keyPattern(name string) string {
	ns := f.namespace
	if f.allNamespaces {
		ns = "*"
	}
	if name == "" {
		return ns + ".>"
	}
	return ns + "." + name
}

// noneFound says that nothing matched: an error for a name, else a note on
// stderr.
func (f *getConfigsFlags) noneFound(cmd *cobra.Command, kind, name string) error {
	where := ""
	if !f.allNamespaces {
		where = " in namespace " + f.namespace
	}
	if f.client.node != "" {
		where += " on node " + f.client.node
	}
	if name != "" {
		return &jc.NotFoundError{Msg: fmt.Sprintf("%s %q not found%s", strings.ToLower(kind), name, where)}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "No %ss found%s.\n", strings.ToLower(kind), where)
	return nil
}

func newGetConfigMapsCommand() *cobra.Command {
	var f getConfigsFlags
	cmd := &cobra.Command{
		Use:     "configmaps [NAME]",
		Aliases: []string{"configmap", "cm"},
		Short:   "List the ConfigMaps of a namespace (or of every one) from jetlet_configmaps",
		Long: `List ConfigMaps as kubectl does: NAMESPACE, NAME, DATA (the number of keys,
data and binaryData) and AGE (since its creationTimestamp, set when it was
first stored). -o json and -o yaml print the ConfigMaps as stored.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, name, err := f.connect(cmd, args)
			if err != nil {
				return err
			}
			defer c.Close()
			cms, err := c.ConfigMaps(cmd.Context(), f.keyPattern(name))
			if err != nil {
				return err
			}
			now := time.Now()
			rows := make([][]string, len(cms))
			for i, cm := range cms {
				rows[i] = []string{cm.Namespace, cm.Name, strconv.Itoa(len(cm.Data) + len(cm.BinaryData)), ageSince(cm.CreationTimestamp.Time, now)}
			}
			return printObjects(cmd, &f, kindConfigMap, "ConfigMapList", name, cms, "NAMESPACE\tNAME\tDATA\tAGE", rows)
		},
	}
	f.register(cmd, "ConfigMaps")
	return cmd
}

// printObjects prints items as a List of listKind with -o json|yaml, else
// rows under header as a table; none found is f.noneFound of kind.
func printObjects[T any](cmd *cobra.Command, f *getConfigsFlags, kind, listKind, name string, items []T, header string, rows [][]string) error {
	w := cmd.OutOrStdout()
	if f.output != outputTable {
		return printList(w, f.output, listKind, items)
	}
	if len(items) == 0 {
		return f.noneFound(cmd, kind, name)
	}
	tw := newTable(w)
	fmt.Fprintln(tw, header)
	for _, row := range rows {
		writeRow(tw, row...)
	}
	return tw.Flush()
}

func newGetSecretsCommand() *cobra.Command {
	var f getConfigsFlags
	cmd := &cobra.Command{
		Use:     "secrets [NAME]",
		Aliases: []string{"secret"},
		Short:   "List the sealed Secrets of a namespace (or of every one) from jetlet_secrets, never a value",
		Long: `List the Secrets of jetlet_secrets, one line per node each is sealed for:
NAMESPACE, NAME, NODE and AGE (since it was last sealed and put). Nothing of
what a Secret holds can be read without the node's key: not its values, not
its keys, not its type; kubectl's TYPE and DATA columns have no counterpart
here. --node lists one node's. -o json and -o yaml print the SealedSecret
envelopes as stored (ciphertext, and the sender's public key).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, name, err := f.connect(cmd, args)
			if err != nil {
				return err
			}
			defer c.Close()
			secrets, err := c.SealedSecrets(cmd.Context(), nodeToken(f.client.node)+"."+f.keyPattern(name))
			if err != nil {
				return err
			}
			now := time.Now()
			envelopes := make([]schemas.SealedSecret, len(secrets))
			rows := make([][]string, len(secrets))
			for i, s := range secrets {
				envelopes[i] = s.SealedSecret
				rows[i] = []string{s.Namespace, s.Name, s.Node, ageSince(s.Put, now)}
			}
			return printObjects(cmd, &f, kindSecret, "SealedSecretList", name, envelopes, "NAMESPACE\tNAME\tNODE\tAGE", rows)
		},
	}
	f.register(cmd, "Secrets")
	return cmd
}
