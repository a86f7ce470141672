// Command jetlet-shim is the embedded runtime's per-pod shim and container
// init (package shim) as a binary of its own: it links none of jetlet's
// Kubernetes, NATS or gRPC code, so each pod's supervisor costs little memory.
// jetlet starts it; it is not meant to be run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/jetlet/jetlet/runtime/embedded/shim"
)

func main() {
	if !shim.Requested() {
		fmt.Fprintln(os.Stderr, "jetlet-shim is started by jetlet's embedded runtime, not by hand")
		os.Exit(2)
	}
	os.Exit(shim.Main())
}
