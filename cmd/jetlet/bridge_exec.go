package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// bridgeProgram is the program `jetlet bridge` runs.
const bridgeProgram = "jetlet-bridge"

// newBridgeCommand is `jetlet bridge`: jetlet-bridge (cmd/jetlet-bridge)
// run in jetlet's place with the same arguments, found as the embedded
// runtime finds jetlet-shim: beside jetlet, as installed, else in PATH.
func newBridgeCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "bridge --kubeconfig FILE",
		Short:              "Make each node of the fleet a Node of a Kubernetes control plane (runs " + bridgeProgram + "; docs/kubernetes.md)",
		DisableFlagParsing: true, // every flag is jetlet-bridge's
		RunE: func(_ *cobra.Command, args []string) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			path, err := bridgeBinary(self)
			if err != nil {
				return err
			}
			return syscall.Exec(path, append([]string{path}, args...), os.Environ())
		},
	}
}

// bridgeBinary is the jetlet-bridge beside the jetlet at self, else the
// one in PATH.
func bridgeBinary(self string) (string, error) {
	beside := filepath.Join(filepath.Dir(self), bridgeProgram)
	if _, err := os.Stat(beside); err == nil {
		return beside, nil
	}
	path, err := exec.LookPath(bridgeProgram)
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("jetlet bridge runs %s, found neither beside %s nor in PATH: build it with `go build ./cmd/%s` and install it beside jetlet", bridgeProgram, self, bridgeProgram)
	}
	return path, err
}
