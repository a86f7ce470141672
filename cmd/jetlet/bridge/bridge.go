// Package bridge is `jetlet bridge`: the flags of internal/bridge, which
// makes each node of a jetlet fleet a Node of a Kubernetes control plane.
// It is the jetlet-bridge program's (cmd/jetlet-bridge), which `jetlet
// bridge` runs: linked into jetlet, the bridge's Kubernetes libraries
// (apiserver, client-go, virtual-kubelet) doubled the binary and the memory
// of every jetlet process, `jetlet run` and its pod shims included.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/internal/bridge"
	"github.com/jetlet/jetlet/schemas"
)

type flags struct {
	nats          cli.NATSFlags
	dataDir       string
	subjectPrefix string
	kubeconfig    string
	logLevel      string
	qps           float32
	burst         int
	bridge        bridge.Config
}

// Main runs `jetlet bridge` with args, as the jetlet-bridge program.
func Main(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return cli.Execute(ctx, cli.NewRoot(NewCommand()), append([]string{"bridge"}, args...), os.Stderr)
}

// NewCommand is `jetlet bridge`.
func NewCommand() *cobra.Command {
	var f flags
	cmd := &cobra.Command{
		Use:   "bridge --kubeconfig FILE",
		Short: "Make each node of the fleet a Node of a Kubernetes control plane (docs/kubernetes.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd, &f)
		},
	}
	fs := cmd.Flags()
	f.nats.Register(fs, jc.DefaultURL)
	fs.StringVar(&f.dataDir, "data-dir", "./jetlet-data", "data dir of a jetlet run, whose "+cli.ClientSeedFile+" seed is used when no other NATS credentials are given")
	fs.StringVar(&f.subjectPrefix, "subject-prefix", schemas.DefaultSubjectPrefix, "first token of every jetlet subject")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the control plane (required outside a cluster; in a pod, its service account)")
	fs.StringVar(&f.logLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.Float32Var(&f.qps, "kube-api-qps", 50, "requests per second to the API server, Events apart (kubelet's default, for one node: raise it for a large fleet)")
	fs.IntVar(&f.burst, "kube-api-burst", 100, "burst of requests to the API server (kubelet's default), Events apart")
	fs.StringVar(&f.bridge.KubeletListen, "kubelet-listen", "", "host:port from which each node's kubelet API takes a port of its own, for kubectl logs, exec, attach, port-forward and metrics-server (\":10250\"; port 0: any free one); empty: none")
	fs.StringVar(&f.bridge.KubeletAddress, "kubelet-address", "", "the address the Nodes advertise for the kubelet API (their InternalIP, which kube-apiserver dials)")
	fs.StringVar(&f.bridge.ClientCAFile, "client-ca-file", "", "CA of the client certificates the kubelet API accepts (the cluster's, which signs kube-apiserver's --kubelet-client-certificate)")
	fs.StringVar(&f.bridge.TLSCertFile, "tls-cert-file", "", "the kubelet API's serving certificate (default: one made for --kubelet-address, signed by itself)")
	fs.StringVar(&f.bridge.TLSKeyFile, "tls-private-key-file", "", "the key of --tls-cert-file")
	fs.DurationVar(&f.bridge.LeaseDuration, "node-lease-duration", 40*time.Second, "each Node's Lease duration, renewed at a quarter of it while the node's heartbeat is fresh")
	le := &f.bridge.LeaderElection
	fs.BoolVar(&le.Enabled, "leader-elect", true, "elect the bridge that bridges among those of the fleet, by a Lease; the others stand by (false: bridge at once, the only bridge)")
	fs.DurationVar(&le.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits from the leader's last renewal before it takes over")
	fs.DurationVar(&le.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops leading (and exits); shorter than the lease duration")
	fs.DurationVar(&le.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "the wait between tries to take or renew the Lease; shorter than the renew deadline")
	fs.StringVar(&le.Namespace, "leader-elect-resource-namespace", "kube-system", "namespace of the leader election's Lease")
	fs.StringVar(&le.Name, "leader-elect-resource-name", "jetlet-bridge", "name of the leader election's Lease")
	return cmd
}

func run(cmd *cobra.Command, f *flags) error {
	log, err := cli.NewLogger(f.logLevel, os.Stderr)
	if err != nil {
		return err
	}
	config, err := kubeConfig(f.kubeconfig)
	if err != nil {
		return err
	}
	if f.qps <= 0 || f.burst <= 0 {
		return fmt.Errorf("--kube-api-qps %v, --kube-api-burst %d: both must be positive", f.qps, f.burst)
	}
	config.UserAgent, config.QPS, config.Burst = "jetlet-bridge", f.qps, f.burst
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	// Events have a client and a rate limit of their own, as kubelet's:
	// a burst of them does not hold up the pods' statuses.
	if f.bridge.Events, err = kubernetes.NewForConfig(config); err != nil {
		return err
	}
	opts := f.nats.ClientOptions()
	opts.DataDir, opts.SubjectPrefix, opts.Name, opts.LongLived = f.dataDir, f.subjectPrefix, "jetlet bridge", true
	jetlet, err := jc.Connect(cmd.Context(), opts)
	if err != nil {
		return err
	}
	defer jetlet.Close()
	b, err := bridge.New(kube, jetlet, log, f.bridge)
	if err != nil {
		return err
	}
	log.Info().Str("api_server", config.Host).Str("nats", jetlet.URL()).Msg("bridge started")
	return b.Run(cmd.Context())
}

// kubeConfig is path's config, or in a pod its service account's.
func kubeConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	config, err := rest.InClusterConfig()
	if errors.Is(err, rest.ErrNotInCluster) {
		return nil, errors.New("--kubeconfig is required outside a Kubernetes cluster")
	}
	return config, err
}
