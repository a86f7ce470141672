// Command metricsserver is metrics-server v0.8.0, as its own main builds it,
// for the test control plane (test/kube/controlplane runs it with
// up --metrics-server). It is a module of its own because metrics-server
// is built against the Kubernetes libraries of its release, which the
// control plane's (v1.37) no longer serve it with: its generated OpenAPI
// names its types by Go path, the newer libraries by model name.
package main

import (
	"os"

	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/logs"
	"sigs.k8s.io/metrics-server/cmd/metrics-server/app"
)

func main() {
	logs.InitLogs()
	defer logs.FlushLogs()
	if err := app.NewMetricsServerCommand(genericapiserver.SetupSignalHandler()).Execute(); err != nil {
		os.Exit(1)
	}
}
