// Command jetlet-bridge is `jetlet bridge` (package cmd/jetlet/bridge), a
// program of its own that jetlet runs from beside itself: the bridge's
// Kubernetes libraries stay out of the jetlet binary.
package main

import (
	"os"

	"github.com/jetlet/jetlet/cmd/jetlet/bridge"
)

func main() { os.Exit(bridge.Main(os.Args[1:])) }
