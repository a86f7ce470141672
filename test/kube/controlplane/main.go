// Command controlplane is a Kubernetes control plane for tests, built from Go
// modules: etcd embedded, and kube-apiserver, kube-scheduler,
// kube-controller-manager and kubectl from k8s.io/kubernetes, all in one
// binary that runs each as its own process (each component installs
// process-wide state: signal handlers, flags, metrics registries).
//
//	controlplane up --dir DIR           certs, etcd and the three components;
//	                                    DIR/admin.kubeconfig is the admin's
//	  [--metrics-server BINARY]         and metrics-server (test/kube/metricsserver)
//	                                    behind the aggregation layer
//	controlplane kubectl ARGS...        kubectl
//	controlplane kube-apiserver ARGS... one component (what up runs)
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

var components = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: controlplane up --dir DIR | kubectl ARGS... | kube-apiserver|kube-scheduler|kube-controller-manager ARGS...")
		os.Exit(2)
	}
	// Each command reads os.Args as its own (kubectl's plugin lookup does).
	name := os.Args[1]
	os.Args = os.Args[1:]
	switch name {
	case "up":
		os.Exit(up(os.Args[1:]))
	case "kubectl":
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck // as kubectl's own main
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	}
	newCommand, ok := components[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "controlplane: no command %q\n", name)
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}
