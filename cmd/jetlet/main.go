// Command jetlet is the node agent (`jetlet run`) and its client commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/runtime/proc"
)

func main() {
	// The embedded runtime re-executes this binary as each container's shim.
	if proc.ShimRequested() {
		os.Exit(proc.ShimMain())
	}
	os.Exit(execute(os.Args[1:]))
}

// execute runs the command line args and returns the process exit code.
func execute(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	root := newRootCommand()
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		var exit exitCodeError
		if errors.As(err, &exit) {
			return exit.code
		}
		fmt.Fprintln(os.Stderr, "jetlet:", err)
		return 1
	}
	return 0
}

// exitCodeError ends the process with a code and no further message (the
// command has already said what went wrong).
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "jetlet",
		Short:         "jetlet runs pods from NATS JetStream through the Kubernetes CRI",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// Flags may come from JETLET_<FLAG> environment variables.
			return bindEnv(cmd)
		},
	}
	root.AddCommand(newRunCommand(), newVersionCommand(), newApplyCommand(), newDeleteCommand(), newGetCommand(), newEventsCommand(), newHistoryCommand(), newDescribeCommand(),
		newProvisionCommand(), newNATSConfigCommand(), newNodeCommand())
	return root
}

func init() {
	// zerolog.Ctx on a context without a logger uses this one instead of
	// silently dropping the line.
	zerolog.DefaultContextLogger = &logger
}
