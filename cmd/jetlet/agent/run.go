package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/consumer"
	"github.com/jetlet/jetlet/internal/podcgroups"
	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/reconcile/pullmanager"
	"github.com/jetlet/jetlet/runtime/containerlogs"
	"github.com/jetlet/jetlet/runtime/embedded"
	"github.com/jetlet/jetlet/runtime/embedded/network"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/schemas/natsjs/registry"
)

// defaultPodMaxPids is --pod-max-pids' default, where kubelet's is no limit:
// one pod's fork bomb must not take the node's last pid. Under the kernel's
// own pid_max of 32768 seven pods at the limit still leave the host about
// 4000 (systemd raises pid_max to 4194304 on 64-bit hosts), and it is far
// above what a pod runs (a busy JVM: a few hundred threads).
const defaultPodMaxPids = 4096

// runConfig is everything `jetlet run` is told on its command line.
type runConfig struct {
	node                  string
	dataDir               string
	nats                  cli.NATSFlags
	natsListen            string
	natsInsecure          bool
	natsPingInterval      time.Duration
	natsMaxPingsOut       int
	runtimeEndpoint       string
	runtimeRequestTimeout time.Duration
	workers               int
	intakeReplicas        int
	httpListen            string
	allowPrivileged       bool
	podMaxPids            int64
	cgroupDriver          string
	cgroupsPerQOS         bool
	runtimeShim           string
	imageCredentials      string
	// The checks that a pod may use an image already present
	// (reconcile/pullmanager): kubelet's imagePullCredentialsVerificationPolicy
	// and preloadedImagesVerificationAllowlist.
	imagePullVerification          string
	preloadedImagesVerifyAllowlist []string
	renameNode                     bool
	logLevel                       string
	shutdownTimeout                time.Duration
	relistPeriod                   time.Duration
	eventedRelistPeriod            time.Duration
	resyncPeriod                   time.Duration
	maxDeadPerContainer            int
	// The --container-log-* flags, and the rotation config validate makes
	// of them.
	containerLogMaxSize         string
	containerLogMaxFiles        int
	containerLogMonitorInterval time.Duration
	containerLogs               containerlogs.Config
	profiling                   bool
	streams                     natsjs.StreamsConfig

	// imageRegistryListen is the loopback address of the registry serving
	// jetlet_images ("" for none); imageRegistryListenSet: it was given,
	// so it must be served.
	imageRegistryListen    string
	imageRegistryListenSet bool

	// The embedded runtime's CNI network (empty: its node-local bridge
	// network, podBridge and podCIDR).
	cniConfDir string
	cniBinDirs []string
	podBridge  string
	podCIDR    string
	// insecureRegistries are pulled from over plain HTTP by the embedded
	// runtime (localhost and 127.0.0.0/8 always are).
	insecureRegistries []string
	// hostPrograms makes the embedded runtime run host programs instead of
	// images (embedded.Config.HostPrograms).
	hostPrograms bool
	// imageStoreDir is the embedded runtime's image store (""
	// <data-dir>/runtime/images; embedded.Config.ImageDir).
	imageStoreDir string
	// nodeStatus: what the node is and what it admits (node_flags.go).
	nodeStatus nodeFlags
	// The pods' DNS, as kubelet's --cluster-dns, --cluster-domain and
	// --resolv-conf (reconcile.Config).
	clusterDNS    []string
	clusterDomain string
	resolvConf    string
	// defaultHostUsers: pods that leave hostUsers unset run with the host's
	// users (kubelet's); false gives them a user namespace of their own
	// where the runtime supports them (reconcile.Config.UserNamespacesByDefault).
	defaultHostUsers bool
	// memorySwapBehavior is --memory-swap-behavior, which validate parses
	// into swapBehavior.
	memorySwapBehavior string
	swapBehavior       reconcile.SwapBehavior
}

func NewRunCommand() *cobra.Command {
	var cfg runConfig
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the node agent: consume intents, drive the CRI runtime, publish results and events",
		Long: `Run the node agent for one node.

Without --nats-url an embedded NATS server with JetStream starts in-process,
storing under --data-dir and listening on --nats-listen. It admits only the
nkey whose seed jetlet writes to --data-dir/` + cli.ClientSeedFile + ` (readable by the
user running jetlet only), which the client commands use; --nats-insecure
admits anyone. Without
--runtime-endpoint the embedded process runtime starts on a socket under
--data-dir. Every flag can also be set with its JETLET_<FLAG> variable.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := setupLogging(cfg.logLevel, os.Stderr); err != nil {
				return err
			}
			cfg.imageRegistryListenSet = cmd.Flags().Changed("image-registry-listen")
			if err := cfg.validate(); err != nil {
				return err
			}
			if err := cfg.nodeStatus.validate(cfg.allowPrivileged, cmd.Flags().Changed("pod-security")); err != nil {
				return err
			}
			return newAgent(cfg).run(cmd.Context())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.node, "node", defaultNodeName(), "node name (a DNS-1123 label; default: from the host name)")
	fs.StringVar(&cfg.dataDir, "data-dir", "./jetlet-data", "directory for the embedded NATS store, the embedded runtime and pod data")
	cfg.nats.Register(fs, "")
	fs.StringVar(&cfg.natsListen, "nats-listen", "127.0.0.1:4222", "embedded NATS listen address (port 0 picks a free port); ignored with --nats-url")
	fs.BoolVar(&cfg.natsInsecure, "nats-insecure", false, "let the embedded NATS server admit anyone, without credentials (by default it admits the nkey of --data-dir/"+cli.ClientSeedFile+" only)")
	fs.DurationVar(&cfg.natsPingInterval, "nats-ping-interval", time.Second, "how often jetlet pings its NATS server; with --nats-max-pings-out it bounds how long jetlet stays on a server that stopped answering before it moves to another")
	fs.IntVar(&cfg.natsMaxPingsOut, "nats-max-pings-out", 2, "unanswered pings after which jetlet leaves its NATS server for another")
	fs.StringVar(&cfg.runtimeEndpoint, "runtime-endpoint", "", "CRI runtime endpoint (unix:///run/containerd/containerd.sock); empty starts the embedded process runtime")
	fs.DurationVar(&cfg.runtimeRequestTimeout, "runtime-request-timeout", 2*time.Minute, "timeout of every CRI call but image pulls")
	fs.StringVar(&cfg.cniConfDir, "cni-conf-dir", "", "CNI network config dir of the embedded runtime: each pod not on the host network gets its own network namespace, set up with the first config in it (.conflist, .conf, .json; lexical order); empty: the node-local bridge network (--pod-bridge, --pod-cidr)")
	fs.StringSliceVar(&cfg.cniBinDirs, "cni-bin-dir", embedded.DefaultCNIBinDirs, "directories searched for the CNI plugins, in order (comma-separated)")
	fs.StringVar(&cfg.podBridge, "pod-bridge", embedded.DefaultPodBridge, "bridge of the embedded runtime's node-local pod network (without --cni-conf-dir)")
	fs.StringVar(&cfg.podCIDR, "pod-cidr", embedded.DefaultPodCIDR, "IPv4 subnet of the embedded runtime's node-local pod network (without --cni-conf-dir); the bridge takes its first address")
	fs.IntVar(&cfg.workers, "workers", 16, "pods synced concurrently")
	fs.IntVar(&cfg.intakeReplicas, "intake-replicas", 1, "replicas of the node's durable consumer on JETLET_INTENTS: 1 keeps it on one server, in memory where the streams are replicated (--replicas above 1), and makes it anew when that server is lost or restarted (a third of a replicated consumer's cost: docs/scaling.md); 0 gives it the stream's replicas (a Raft group per node)")
	fs.StringVar(&cfg.httpListen, "http-listen", "127.0.0.1:9464", "address of /healthz, /readyz and /metrics (port 0 picks a free port)")
	fs.BoolVar(&cfg.allowPrivileged, "allow-privileged", false, "accept privileged containers: the same as --pod-security privileged")
	cfg.nodeStatus.register(fs)
	fs.StringSliceVar(&cfg.clusterDNS, "cluster-dns", nil, "IPs of the cluster's DNS service (comma-separated, at most 3): the nameservers of dnsPolicy ClusterFirst pods; without any, those pods get the node's resolver and a MissingClusterDNS event, as with kubelet")
	fs.StringVar(&cfg.clusterDomain, "cluster-domain", reconcile.DefaultClusterDomain, "the cluster's DNS domain: ClusterFirst pods search <namespace>.svc.<domain>, svc.<domain> and <domain>, and a pod with a subdomain is named <hostname>.<subdomain>.<namespace>.svc.<domain>")
	fs.StringVar(&cfg.resolvConf, "resolv-conf", reconcile.DefaultResolvConf, "the node's resolver file, the DNS of dnsPolicy Default pods (and the searches ClusterFirst pods add)")
	fs.StringVar(&cfg.runtimeShim, "runtime-shim", "", "the embedded runtime's per-pod shim binary; empty: jetlet-shim beside jetlet, else built on first use for a development build, else jetlet itself")
	fs.Int64Var(&cfg.podMaxPids, "pod-max-pids", defaultPodMaxPids, "most processes (threads included) a pod may run, all its containers together, through its pod cgroup (kubelet's --pod-max-pids, whose default is no limit); -1: no limit")
	fs.StringVar(&cfg.cgroupDriver, "cgroup-driver", string(podcgroups.Cgroupfs), "how pod cgroups are made on a CRI runtime that does not say (CRI RuntimeConfig): cgroupfs or systemd, as the runtime's (containerd's SystemdCgroup); a runtime that says overrides it, as with kubelet")
	fs.BoolVar(&cfg.cgroupsPerQOS, "cgroups-per-qos", true, "on a CRI runtime, make kubelet's pod cgroups (kubepods, its QoS levels, one per pod with the pod's resources) and put each pod's sandbox in its own (kubelet's --cgroups-per-qos); needs root")
	fs.BoolVar(&cfg.defaultHostUsers, "default-host-users", true, "pods that leave spec.hostUsers unset run with the host's users, as with kubelet; false runs them in a user namespace of their own (as hostUsers: false) where the runtime supports user namespaces, unless they share a host namespace or run a privileged container; a running pod keeps what it started with (docs/security.md)")
	fs.StringVar(&cfg.memorySwapBehavior, "memory-swap-behavior", string(reconcile.NoSwap), "how containers may use the node's swap (kubelet's memorySwap.swapBehavior): NoSwap keeps them out of it; LimitedSwap gives each container of a Burstable pod that is not critical and requests less memory than its limit a share of the swap in proportion to its memory request (cgroup v2 only; refused at start on v1)")
	fs.BoolVar(&cfg.hostPrograms, "host-programs", false, "the embedded runtime runs the host's programs instead of images (the program an image's reference names, in the host's tree with its secrets hidden); isolation partial")
	fs.StringVar(&cfg.imageStoreDir, "image-store-dir", "", "the embedded runtime's image store (empty: <data-dir>/runtime/images); on another file system than the data dir it is kubelet's split image file system (KEP-4191): imagefs is the store's, containerfs and nodefs the data dir's (docs/node.md)")
	fs.StringSliceVar(&cfg.insecureRegistries, "insecure-registry", nil, "registry hosts (host or host:port, comma-separated) the embedded runtime pulls from over plain HTTP; localhost and 127.0.0.0/8 always are")
	fs.StringVar(&cfg.imageCredentials, "image-credentials", "", "registry credentials of image pulls, in Docker's config.json format (default: <data-dir>/"+defaultCredentialsFile+" when present); re-read when it changes")
	fs.StringVar(&cfg.imagePullVerification, "image-pull-credentials-verification-policy", string(pullmanager.DefaultPolicy),
		"which images already on the node a pod must have credentials for (kubelet's imagePullCredentialsVerificationPolicy): NeverVerify; NeverVerifyPreloadedImages (images jetlet did not pull are everyone's); NeverVerifyAllowlistedImages (only --preloaded-images-verification-allowlist's are); AlwaysVerify")
	fs.StringSliceVar(&cfg.preloadedImagesVerifyAllowlist, "preloaded-images-verification-allowlist", nil,
		"with NeverVerifyAllowlistedImages, the images (full names without tag or digest, or prefixes ending in /*; comma-separated) every pod may use without credentials (kubelet's preloadedImagesVerificationAllowlist)")
	fs.StringVar(&cfg.imageRegistryListen, "image-registry-listen", registry.DefaultListen, "loopback address of the read-only registry serving the images of jetlet_images (jetlet image push), which containerd's hosts.toml names (docs/containerd.md); empty: not served")
	fs.BoolVar(&cfg.renameNode, "rename-node", false, "let --node differ from the node name the data dir recorded, and record it")
	fs.BoolVar(&cfg.profiling, "profiling", false, "serve Go's /debug/pprof/ on --http-listen")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "trace, debug, info, warn or error")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for in-flight syncs and publishes")
	fs.DurationVar(&cfg.relistPeriod, "relist-period", time.Second, "how often the runtime's pods are listed to notice changes (kubelet's PLEG relist)")
	fs.DurationVar(&cfg.eventedRelistPeriod, "evented-relist-period", 0, "how often the runtime's pods are listed while its container event stream (CRI GetContainerEvents) is connected, each event relisting at once; --relist-period again as soon as the stream breaks (kubelet's evented PLEG relists every 300s); 0: --relist-period")
	fs.DurationVar(&cfg.resyncPeriod, "resync-period", time.Minute, "how often every pod is synced again even when nothing changed (plus up to 10% jitter)")
	fs.IntVar(&cfg.maxDeadPerContainer, "max-dead-containers-per-container", 1, "dead instances kept per container (kubelet's --maximum-dead-containers-per-container)")
	fs.StringVar(&cfg.containerLogMaxSize, "container-log-max-size", "10Mi", "size (a quantity: 10Mi, 500Ki) past which a container's log is rotated (kubelet's containerLogMaxSize)")
	fs.IntVar(&cfg.containerLogMaxFiles, "container-log-max-files", containerlogs.DefaultMaxFiles, "log files kept per container, the current one included; all but the newest two are compressed (kubelet's containerLogMaxFiles)")
	fs.DurationVar(&cfg.containerLogMonitorInterval, "container-log-monitor-interval", containerlogs.DefaultInterval, "how often container logs are looked at for rotation (kubelet's containerLogMonitorInterval)")
	fs.StringVar(&cfg.streams.SubjectPrefix, "subject-prefix", schemas.DefaultSubjectPrefix, "first token of every jetlet subject")
	cli.RegisterStreamFlags(fs, &cfg.streams)
	cli.AnnotateEnv(fs)
	return cmd
}

// defaultNodeName derives a DNS-1123 label from the host name, as kubelet
// derives its node name: the first label, lower case, other characters as '-'.
func defaultNodeName() string {
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(strings.ToLower(host), ".")
	name := []byte(host)
	for i, c := range name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			name[i] = '-'
		}
	}
	label := strings.Trim(string(name), "-")
	if len(label) > 63 {
		label = strings.TrimRight(label[:63], "-")
	}
	if label == "" {
		return "node"
	}
	return label
}

func (c *runConfig) validate() error {
	if !schemas.ValidNodeName(c.node) {
		return fmt.Errorf("--node %q: not a DNS-1123 label (lower-case letters, digits and '-', at most 63); set --node or JETLET_NODE", c.node)
	}
	if c.dataDir == "" {
		return errors.New("--data-dir must not be empty")
	}
	// Pods keep absolute paths (logs, volumes) to it.
	abs, err := filepath.Abs(c.dataDir)
	if err != nil {
		return fmt.Errorf("--data-dir: %w", err)
	}
	c.dataDir = abs
	if c.workers < 1 {
		return fmt.Errorf("--workers %d: must be at least 1", c.workers)
	}
	if c.intakeReplicas < 0 || c.intakeReplicas > 5 {
		return fmt.Errorf("--intake-replicas %d: want 0 (the stream's) or 1 to 5", c.intakeReplicas)
	}
	if c.podMaxPids < -1 {
		return fmt.Errorf("--pod-max-pids %d: want -1 (no limit) or more", c.podMaxPids)
	}
	if c.swapBehavior, err = reconcile.ParseSwapBehavior(c.memorySwapBehavior); err != nil {
		return fmt.Errorf("--memory-swap-behavior: %w", err)
	}
	if _, err := podcgroups.ParseDriver(c.cgroupDriver); err != nil {
		return fmt.Errorf("--cgroup-driver: %w", err)
	}
	if c.cniConfDir != "" && c.runtimeEndpoint != "" {
		return errors.New("--cni-conf-dir configures the embedded runtime's network; with --runtime-endpoint that runtime's own CNI config applies")
	}
	if c.imageStoreDir != "" {
		if c.runtimeEndpoint != "" {
			return errors.New("--image-store-dir places the embedded runtime's images; with --runtime-endpoint that runtime's own config applies")
		}
		if c.imageStoreDir, err = filepath.Abs(c.imageStoreDir); err != nil {
			return fmt.Errorf("--image-store-dir: %w", err)
		}
	}
	if c.runtimeEndpoint != "" && (c.podBridge != embedded.DefaultPodBridge || c.podCIDR != embedded.DefaultPodCIDR) {
		return errors.New("--pod-bridge and --pod-cidr configure the embedded runtime's network; with --runtime-endpoint that runtime's own CNI config applies")
	}
	if err := (network.Bridge{Name: c.podBridge, Subnet: c.podCIDR}).Validate(); err != nil {
		return fmt.Errorf("--pod-bridge, --pod-cidr: %w", err)
	}
	if c.runtimeRequestTimeout <= 0 {
		return fmt.Errorf("--runtime-request-timeout %s: must be positive", c.runtimeRequestTimeout)
	}
	if c.relistPeriod < 10*time.Millisecond {
		return fmt.Errorf("--relist-period %s: must be at least 10ms", c.relistPeriod)
	}
	if c.eventedRelistPeriod != 0 && c.eventedRelistPeriod < c.relistPeriod {
		return fmt.Errorf("--evented-relist-period %s: must be 0 or at least --relist-period (%s)", c.eventedRelistPeriod, c.relistPeriod)
	}
	if c.resyncPeriod < time.Second {
		return fmt.Errorf("--resync-period %s: must be at least 1s", c.resyncPeriod)
	}
	if c.maxDeadPerContainer < 1 {
		return fmt.Errorf("--max-dead-containers-per-container %d: must be at least 1 (the newest dead instance holds the restart count)", c.maxDeadPerContainer)
	}
	size, err := resource.ParseQuantity(c.containerLogMaxSize)
	if err != nil || size.Sign() <= 0 {
		return fmt.Errorf("--container-log-max-size %q: want a positive quantity like 10Mi", c.containerLogMaxSize)
	}
	c.containerLogs = containerlogs.Config{MaxSize: size.Value(), MaxFiles: c.containerLogMaxFiles, Interval: c.containerLogMonitorInterval}
	if c.containerLogMaxFiles < 2 {
		return fmt.Errorf("--container-log-max-files %d: must be at least 2 (the current file and one rotated)", c.containerLogMaxFiles)
	}
	if c.containerLogMonitorInterval <= 0 {
		return fmt.Errorf("--container-log-monitor-interval %s: must be positive", c.containerLogMonitorInterval)
	}
	if err := pullmanager.CheckPolicy(pullmanager.Policy(c.imagePullVerification), c.preloadedImagesVerifyAllowlist); err != nil {
		return fmt.Errorf("--image-pull-credentials-verification-policy, --preloaded-images-verification-allowlist: %w", err)
	}
	if c.imageRegistryListen != "" {
		if err := registry.CheckLoopback(c.imageRegistryListen); err != nil {
			return fmt.Errorf("--image-registry-listen %w", err)
		}
	}
	if c.shutdownTimeout <= 0 {
		return fmt.Errorf("--shutdown-timeout %s: must be positive", c.shutdownTimeout)
	}
	if !schemas.ValidSubjectPrefix(c.streams.SubjectPrefix) {
		return fmt.Errorf("--subject-prefix %q: must be one subject token", c.streams.SubjectPrefix)
	}
	if _, err := c.nats.Options(); err != nil {
		return err
	}
	if c.nats.URL != "" && c.nats.InboxPrefix == "" {
		// Permissions can then keep each node to its own replies.
		c.nats.InboxPrefix = cli.InboxPrefix(c.node)
	}
	if c.natsPingInterval < 100*time.Millisecond {
		return fmt.Errorf("--nats-ping-interval %s: must be at least 100ms", c.natsPingInterval)
	}
	if c.natsMaxPingsOut < 1 {
		return fmt.Errorf("--nats-max-pings-out %d: must be at least 1", c.natsMaxPingsOut)
	}
	if c.natsInsecure && c.nats.URL != "" {
		return errors.New("--nats-insecure opens the embedded NATS server; with --nats-url there is none (that server's config decides who it admits)")
	}
	c.streams.SetDefaults()
	return c.streams.Validate()
}

// agent is one running `jetlet run`: it owns the process's parts and their
// start-up and shutdown order.
type agent struct {
	cfg   runConfig
	log   zerolog.Logger
	ready readiness

	nc          atomic.Pointer[nats.Conn]
	provisioned atomic.Bool
	denials     natsjs.Denials
	// deniedTotal counts what NATS refused this node, by kind
	// (jetlet_permission_denied_total{what}).
	deniedTotal   *prometheus.CounterVec
	runtimeHealth atomic.Pointer[error] // nil until the runtime answered once
	// runtimeNetwork is the node's NetworkUnavailable, kept by watchRuntime;
	// nil until the runtime answered once.
	runtimeNetwork atomic.Pointer[schemas.NodeCondition]
	// isolation is the embedded runtime's isolation level, for the node
	// record; set before serving, empty with another runtime.
	isolation schemas.IsolationLevel
	// imageRegistry serves jetlet_images on loopback: bound before the
	// runtime starts, served by the pipeline; nil when not served. Set once
	// before either reads it.
	imageRegistry *registry.Server
	// credentials are the registry credentials, loaded before anything
	// starts.
	credentials reconcile.Credentials
	attached    atomic.Pointer[consumer.Consumer]
	// busUp is closed once the streams are provisioned: what needs the bus
	// to start waits for it, the pods do not.
	busUp chan struct{}
}

func newAgent(cfg runConfig) *agent {
	return &agent{cfg: cfg, log: logger.With().Str("component", "agent").Str("node", cfg.node).Logger(), busUp: make(chan struct{})}
}

func (a *agent) run(ctx context.Context) error {
	if err := makeDataDir(a.cfg.dataDir); err != nil {
		return err
	}
	// Before anything else opens it: one jetlet run per data dir, held until
	// the process exits.
	lock, err := lockDataDir(a.cfg.dataDir)
	if err != nil {
		return err
	}
	defer lock.Close()
	was, err := closeDataDir(a.cfg.dataDir)
	if err != nil {
		return err
	}
	if was != 0 {
		a.log.Info().Str("dir", a.cfg.dataDir).Str("was", fmt.Sprintf("%04o", was)).Msg("data dir made mode 0700: closed to other users")
	}
	// Before anything starts: a data dir taken for another node kills nothing.
	renamedFrom, err := claimDataDir(a.cfg.dataDir, a.cfg.node, a.cfg.renameNode)
	if err != nil {
		return err
	}
	if renamedFrom != "" {
		a.log.Warn().Str("from", renamedFrom).Msg("data dir renamed to this node (--rename-node)")
	}
	if a.credentials, err = loadImageCredentials(a.cfg.imageCredentials, a.cfg.dataDir, logger); err != nil {
		return err
	}
	stopTracing, err := setupTracing(ctx, a.cfg.node)
	if err != nil {
		return err
	}
	defer func() {
		// The spans of the drain are exported too, within the shutdown timeout.
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.cfg.shutdownTimeout)
		defer cancel()
		if err := stopTracing(flushCtx); err != nil {
			a.log.Warn().Err(err).Msg("not every span was exported before exit")
		}
	}()
	a.addReadinessChecks()
	reg := newRegistry()
	a.deniedTotal = newDeniedCounter(reg)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "jetlet_nats_connected",
		Help: "1 while the connection to NATS is up, else 0.",
	}, func() float64 {
		if nc := a.nc.Load(); nc != nil && nc.IsConnected() {
			return 1
		}
		return 0
	}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "jetlet_offline",
		Help: "1 while the node runs its pods from its checkpoint, the bus not reached since start, else 0.",
	}, func() float64 {
		if c := a.attached.Load(); c != nil {
			if _, ok := c.OfflineSince(); ok {
				return 1
			}
		}
		return 0
	}))
	web, err := listenHTTP(a.cfg.httpListen, &a.ready, reg, a.cfg.profiling)
	if err != nil {
		return err
	}
	a.log.Info().Str("address", "http://"+web.addr()).Msg("serving /healthz, /readyz and /metrics")
	webErr := make(chan error, 1)
	go func() { webErr <- web.serve() }()

	var natsServer *server.Server
	var ownAuth []nats.Option
	if a.cfg.nats.URL == "" {
		if natsServer, ownAuth, err = a.startNATS(); err != nil {
			return err
		}
	}
	nc, err := a.connect(natsServer, ownAuth)
	if err != nil {
		return err
	}
	a.nc.Store(nc)
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}

	// Bound before the runtime starts: the embedded runtime pulls through it.
	if a.imageRegistry, err = a.listenImageRegistry(); err != nil {
		return err
	}
	if a.imageRegistry != nil {
		defer a.imageRegistry.Close()
	}

	var embeddedRuntime *embedded.Runtime
	endpoint := a.cfg.runtimeEndpoint
	if endpoint == "" {
		if embeddedRuntime, endpoint, err = a.startEmbeddedRuntime(ctx); err != nil {
			return err
		}
		// Stopping the runtime's server leaves its containers running, for the
		// next jetlet to adopt.
		defer embeddedRuntime.Stop()
		level, _ := embeddedRuntime.Isolation()
		a.isolation = schemas.IsolationLevel(level)
	} else if a.cfg.podMaxPids > 0 && !a.cfg.cgroupsPerQOS {
		// The CRI carries no pids limit: the pod cgroup jetlet makes holds it.
		a.log.Info().Int64("pod_max_pids", a.cfg.podMaxPids).Msg("--pod-max-pids is not applied with --cgroups-per-qos=false: a pod's processes are limited by the runtime's own config")
	}

	// The pods do not wait for the bus: the pipeline starts them from the
	// checkpoint when it is away (docs/operations.md, Offline).
	provisionErr := make(chan error, 1)
	go func() {
		if err := a.provision(ctx, js); err != nil {
			provisionErr <- err
			return
		}
		close(a.busUp)
	}()
	runErr := a.serve(ctx, js, endpoint, reg, webErr, provisionErr)
	a.log.Info().Msg("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), a.cfg.shutdownTimeout)
	defer cancel()
	if err := nc.FlushWithContext(shutdownCtx); err != nil && nc.IsConnected() {
		a.log.Warn().Err(err).Msg("flush on shutdown")
	}
	nc.Close()
	if err := web.shutdown(shutdownCtx); err != nil {
		a.log.Warn().Err(err).Msg("http shutdown")
	}
	if natsServer != nil {
		natsServer.Shutdown()
		natsServer.WaitForShutdown()
	}
	if runErr != nil && !errors.Is(runErr, context.Canceled) {
		return runErr
	}
	a.log.Info().Msg("stopped")
	return nil
}

// serve connects the runtime and runs the pipeline until ctx is done or the
// HTTP server dies or provisioning fails for good (then the agent exits
// non-zero).
func (a *agent) serve(ctx context.Context, js jetstream.JetStream, endpoint string, reg *prometheus.Registry, webErr, provisionErr <-chan error) error {
	client, err := a.connectRuntime(ctx, endpoint, criObserver(reg, a.log))
	if err != nil {
		return err
	}
	defer client.Close()
	watchRuntime(ctx, client, &a.runtimeHealth, &a.runtimeNetwork)

	pipeCtx, stopPipe := context.WithCancelCause(ctx)
	defer stopPipe(nil)
	go func() {
		select {
		case err := <-webErr:
			stopPipe(fmt.Errorf("http server: %w", err))
		case err := <-provisionErr:
			stopPipe(err)
		case <-pipeCtx.Done():
		}
	}()
	a.log.Info().Msg("jetlet started")
	if err := a.servePipeline(pipeCtx, js, client, reg); err != nil {
		return err
	}
	if ctx.Err() == nil {
		return context.Cause(pipeCtx) // the HTTP server's failure, if that is what stopped it
	}
	return nil
}

// addReadinessChecks registers what /readyz requires, before anything serves it.
func (a *agent) addReadinessChecks() {
	a.ready.add("nats", func() error {
		nc := a.nc.Load()
		if nc == nil {
			return errors.New("not connected yet")
		}
		if !nc.IsConnected() {
			return fmt.Errorf("not connected (%s)", nc.Status())
		}
		return nil
	})
	a.ready.add("streams", func() error {
		if !a.provisioned.Load() {
			return errors.New("not provisioned yet")
		}
		return nil
	})
	a.ready.add("consumer", func() error {
		c := a.attached.Load()
		if c == nil {
			return errors.New("not consuming intents")
		}
		if since, ok := c.OfflineSince(); ok {
			return fmt.Errorf("offline since %s: running the pods of the node's checkpoint; intents wait in the stream", since.UTC().Format(time.RFC3339))
		}
		if !c.Attached() {
			return errors.New("not consuming intents")
		}
		return nil
	})
	a.ready.add("runtime", func() error {
		health := a.runtimeHealth.Load()
		if health == nil {
			return errors.New("not connected yet")
		}
		return *health
	})
}

// startNATS starts the embedded NATS server. It admits two nkeys: the client
// seed's in the data dir (written on first start) and one that jetlet makes
// at each start for its own in-process connection and keeps in memory only.
// With --nats-insecure a client without credentials is admitted too, as the
// client key, so that the seed keeps working either way. It returns how
// jetlet's own connection authenticates.
func (a *agent) startNATS() (*server.Server, []nats.Option, error) {
	clientKey, err := cli.EnsureClientSeed(a.cfg.dataDir)
	if err != nil {
		return nil, nil, err
	}
	own, err := nkeys.CreateUser()
	if err != nil {
		return nil, nil, err
	}
	ownKey, err := own.PublicKey()
	if err != nil {
		return nil, nil, err
	}
	auth := embeddedAuth{nkeys: []string{clientKey, ownKey}}
	if a.cfg.natsInsecure {
		auth.anonymous = clientKey
		a.log.Warn().Str("listen", a.cfg.natsListen).
			Msg("--nats-insecure: the embedded NATS server admits anyone who reaches it, and anyone it admits can run processes on this node")
	}
	s, err := startEmbeddedNATS(a.cfg.natsListen, a.cfg.dataDir, a.cfg.node, auth, a.cfg.streams, logger.With().Str("component", "nats-server").Logger())
	if err != nil {
		return nil, nil, err
	}
	if a.cfg.profiling {
		sampleContention()
	}
	a.log.Info().Str("url", s.ClientURL()).Str("store", s.StoreDir()).Str("client_seed", cli.ClientSeedPath(a.cfg.dataDir)).
		Msg("embedded NATS server listening")
	return s, []nats.Option{nats.Nkey(ownKey, own.Sign)}, nil
}

// connect connects to the embedded server in-process with ownAuth, or to
// --nats-url with the --nats-* flags, retrying forever in the background.
func (a *agent) connect(natsServer *server.Server, ownAuth []nats.Option) (*nats.Conn, error) {
	url, opts := a.cfg.nats.URL, ownAuth
	if natsServer != nil {
		url = natsServer.ClientURL()
		opts = append(opts, nats.InProcessServer(natsServer))
	} else {
		var err error
		if opts, err = a.cfg.nats.Options(); err != nil {
			return nil, err
		}
	}
	natsLog := logger.With().Str("component", "nats").Logger()
	opts = append(opts, cli.ReconnectForever(natsLog, a.denied)...)
	// nats.go's defaults (2 min, 2 pings) would keep jetlet on a frozen
	// server for minutes; it leaves one after about interval × (max + 1).
	opts = append(opts, nats.Name("jetlet run "+a.cfg.node),
		nats.PingInterval(a.cfg.natsPingInterval), nats.MaxPingsOutstanding(a.cfg.natsMaxPingsOut))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", url, err)
	}
	return nc, nil
}
