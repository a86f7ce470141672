package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// NewRoot is jetlet's root command over the given subcommands: flags may
// come from JETLET_<FLAG> environment variables; errors are printed once,
// by Execute.
func NewRoot(commands ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:           "jetlet",
		Short:         "jetlet runs pods from NATS JetStream through the Kubernetes CRI",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return BindEnv(cmd)
		},
	}
	root.AddCommand(commands...)
	return root
}

// Execute runs root with args and returns the process exit code, printing
// an error to stderr.
func Execute(ctx context.Context, root *cobra.Command, args []string, stderr io.Writer) int {
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		var exit ExitCodeError
		if errors.As(err, &exit) {
			return exit.Code
		}
		fmt.Fprintln(stderr, "jetlet:", err)
		return 1
	}
	return 0
}

// ExitCodeError ends the process with a code and no further message (the
// command has already said what went wrong).
type ExitCodeError struct{ Code int }

func (e ExitCodeError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }
