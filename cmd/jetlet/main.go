// Command jetlet is the node agent (`jetlet run`, package agent), its
// client commands (package client), and `jetlet bridge`, which runs the
// Kubernetes bridge's own program (cmd/jetlet-bridge).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/jetlet/jetlet/cmd/jetlet/agent"
	"github.com/jetlet/jetlet/cmd/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/runtime/embedded/shim"
	"github.com/spf13/cobra"
)

func main() {
	// The embedded runtime re-executes this binary as each container's shim.
	if shim.Requested() {
		os.Exit(shim.Main())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	root := cli.NewRoot(append([]*cobra.Command{agent.NewRunCommand(), newBridgeCommand(), cli.NewVersionCommand()}, client.Commands()...)...)
	code := cli.Execute(ctx, root, os.Args[1:], os.Stderr)
	stop()
	os.Exit(code)
}
