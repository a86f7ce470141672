package reconcile

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/userns"
)

// ErrInvalidConfig wraps every Config.Validate failure.
var ErrInvalidConfig = errors.New("invalid reconcile config")

// Defaults, kubelet's.
const (
	DefaultBackOffInitial       = 10 * time.Second
	DefaultBackOffMax           = 300 * time.Second
	DefaultImageBackOffInitial  = 10 * time.Second
	DefaultImageBackOffMax      = 300 * time.Second
	DefaultGCMaxPerPodContainer = 1
	minimumGracePeriodInSeconds = 2
	defaultCPUPeriod            = 100000 // µs, CFS quota period
	emptyDirPluginDir           = "kubernetes.io~empty-dir"
	configMapPluginDir          = "kubernetes.io~configmap"
	secretPluginDir             = "kubernetes.io~secret"
	downwardAPIPluginDir        = "kubernetes.io~downward-api"
	projectedPluginDir          = "kubernetes.io~projected"
)

// GCPolicy says which dead containers garbage collection keeps, after
// kubelet's GCPolicy.
type GCPolicy struct {
	// MinAge: a dead container younger than this is kept. Default 0.
	MinAge time.Duration
	// MaxPerPodContainer: dead instances kept per (pod, container); the
	// newest dead instance of a container that does not run is always kept,
	// since its restart count and exit status are what the pod's status is
	// made of. Default 1; negative: no limit.
	MaxPerPodContainer int
}

// Config configures a Kuberuntime. NodeName and DataDir are required.
type Config struct {
	// NodeName is this node's name: events carry it, and the downward API's
	// spec.nodeName reads it when the pod does not name a node.
	NodeName string
	// NodeIP is the downward API's status.hostIP; empty when unknown.
	NodeIP string
	// PodNetworkDown reports whether the runtime says its pod network is
	// not ready (CRI NetworkReady false): a pod's sandbox without an IP is
	// then what the runtime gives (the embedded runtime's pods with only
	// lo), not one to make again. nil: the network is taken to be ready.
	PodNetworkDown func() bool
	// NodeAllocatable is what the downward API's resourceFieldRef reads for a
	// cpu, memory or ephemeral-storage limit a container does not set, as
	// kubelet reads the node's allocatable. cmd/jetlet sets the node's
	// capacity (no reservations). Without it such a reference fails with
	// CreateContainerConfigError.
	NodeAllocatable corev1.ResourceList
	// DataDir holds pod data: emptyDir volumes live under
	// <DataDir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>, removed
	// with the pod by garbage collection.
	DataDir string
	// LogDir is the root of container logs:
	// <LogDir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log.
	// Default <DataDir>/logs.
	LogDir string
	// AllowPrivileged lets containers ask for privileged mode; without it,
	// such a container fails with CreateContainerConfigError.
	AllowPrivileged bool
	// DisableCPUQuota stops CPU limits being enforced with a CFS quota.
	DisableCPUQuota bool
	// Clock drives back-off and status times. Default: the wall clock.
	Clock Clock
	// BackOffInitial and BackOffMax bound the container restart back-off
	// (10 s and 300 s). BackOffReset is how long a container must go without a
	// crash for its back-off to start again from BackOffInitial; default
	// twice BackOffMax (10 minutes), as kubelet.
	BackOffInitial time.Duration
	BackOffMax     time.Duration
	BackOffReset   time.Duration
	// ImageBackOffInitial and ImageBackOffMax bound the back-off of failed
	// image pulls, per pod and image (10 s and 300 s).
	ImageBackOffInitial time.Duration
	ImageBackOffMax     time.Duration
	// GC is the garbage collection policy.
	GC GCPolicy
	// Liveness and Startup probe results decide kills; Startup and Readiness
	// decide the started and ready flags of running containers that have
	// such probes (reconcile/prober's caches). Defaults: NoProbeResults for
	// liveness, AllReady (every probe passed) for startup and readiness.
	Liveness  kubecontainer.ProbeResults
	Startup   kubecontainer.ProbeResults
	Readiness kubecontainer.ProbeResults
	// Credentials gives the node's registry credentials of image pulls,
	// tried after the pod's imagePullSecrets. Default: none (the runtime's
	// own registry configuration applies).
	Credentials Credentials
	// ImagePulls keeps which credentials pulled each image and says whether
	// a pod may use an image present or must pull it itself (kubelet's
	// image pull manager, KubeletEnsureSecretPulledImages). Default: a
	// pullmanager.Manager with kubelet's default policy, its records in
	// <DataDir>/image_manager, not initialised.
	ImagePulls ImagePullRecords
	// Objects gives the ConfigMaps and Secrets pods refer to (volumes, env,
	// envFrom, imagePullSecrets). Nil: none; such references then fail (the
	// decoder keeps such pods away) and pull secrets are skipped.
	Objects kubecontainer.ObjectSource
	// Handlers runs the exec and httpGet handlers of lifecycle hooks (the
	// prober's runner). Without it such a hook fails with a message saying so.
	Handlers kubecontainer.HandlerRunner
	// ClusterDNS are the IPs of the cluster's DNS service (kubelet's
	// --cluster-dns), the nameservers of ClusterFirst pods. Without any, a
	// ClusterFirst pod gets the node's resolver and a MissingClusterDNS
	// event, as kubelet's.
	ClusterDNS []string
	// ClusterDomain is the cluster's DNS domain (kubelet's --cluster-domain):
	// ClusterFirst pods search <namespace>.svc.<domain>, svc.<domain> and
	// <domain>; a pod with a subdomain is <hostname>.<subdomain>.<namespace>.svc.<domain>.
	// Default DefaultClusterDomain.
	ClusterDomain string
	// ResolvConf is the node's resolver file, what Default pods get
	// (kubelet's --resolv-conf). Default DefaultResolvConf.
	ResolvConf string
	// HostsFile is the node's hosts file, which hostNetwork pods' /etc/hosts
	// starts with. Default /etc/hosts.
	HostsFile string
	// UserNamespaces is the host ids the node gives the user namespaces of
	// pods with hostUsers false, 65536 a pod. Default
	// userns.DefaultNodeRange (kubelet's).
	UserNamespaces userns.NodeRange
	// UserNamespacesByDefault gives a pod that does not set hostUsers a user
	// namespace of its own, as hostUsers false, when its first sandbox is
	// made (jetlet run --default-host-users=false, on a runtime that
	// supports them); see withDefaultHostUsers. Off: kubelet's default, the
	// host's users.
	UserNamespacesByDefault bool
	// PodCgroups makes the pods' cgroups on a CRI runtime (kubelet's pod
	// cgroups with --cgroups-per-qos). Nil: none; the runtime places the
	// pods itself (the embedded runtime, in its own subtree).
	PodCgroups PodCgroups
	// Swap is how containers may use the node's swap (kubelet's
	// memorySwap); the zero value sends no swap setting.
	Swap MemorySwap
	// Logger is used with component=reconcile. The zero value logs nothing.
	Logger zerolog.Logger
}

func (c *Config) setDefaults() {
	if c.LogDir == "" && c.DataDir != "" {
		c.LogDir = filepath.Join(c.DataDir, "logs")
	}
	if c.Clock == nil {
		c.Clock = RealClock
	}
	if c.BackOffInitial == 0 {
		c.BackOffInitial = DefaultBackOffInitial
	}
	if c.BackOffMax == 0 {
		c.BackOffMax = DefaultBackOffMax
	}
	if c.BackOffReset == 0 {
		c.BackOffReset = 2 * c.BackOffMax
	}
	if c.ImageBackOffInitial == 0 {
		c.ImageBackOffInitial = DefaultImageBackOffInitial
	}
	if c.ImageBackOffMax == 0 {
		c.ImageBackOffMax = DefaultImageBackOffMax
	}
	if c.GC.MaxPerPodContainer == 0 {
		c.GC.MaxPerPodContainer = DefaultGCMaxPerPodContainer
	}
	if c.Liveness == nil {
		c.Liveness = kubecontainer.NoProbeResults{}
	}
	if c.Startup == nil {
		c.Startup = kubecontainer.AllReady{}
	}
	if c.Readiness == nil {
		c.Readiness = kubecontainer.AllReady{}
	}
	if c.Credentials == nil {
		c.Credentials = NoCredentials{}
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = DefaultClusterDomain
	}
	if c.ResolvConf == "" {
		c.ResolvConf = DefaultResolvConf
	}
	if c.HostsFile == "" {
		c.HostsFile = etcHostsPath
	}
	if c.Swap.Behavior == "" {
		c.Swap.Behavior = NoSwap
	}
	if c.UserNamespaces == (userns.NodeRange{}) {
		c.UserNamespaces = userns.DefaultNodeRange
	}
}

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// isDNSDomain: DNS-1123 labels joined by dots, at most 253 characters.
func isDNSDomain(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if !dns1123Label.MatchString(label) {
			return false
		}
	}
	return true
}

// Validate reports the first problem of a defaulted config, wrapped in
// ErrInvalidConfig.
func (c *Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case !dns1123Label.MatchString(c.NodeName):
		return bad("NodeName %q is not a DNS-1123 label", c.NodeName)
	case c.DataDir == "" || !filepath.IsAbs(c.DataDir):
		return bad("DataDir %q must be an absolute path", c.DataDir)
	case !filepath.IsAbs(c.LogDir):
		return bad("LogDir %q must be an absolute path", c.LogDir)
	case c.BackOffInitial < 0 || c.BackOffMax < c.BackOffInitial:
		return bad("back-off %s..%s: need 0 <= initial <= max", c.BackOffInitial, c.BackOffMax)
	case c.BackOffReset < 0:
		return bad("BackOffReset %s is negative", c.BackOffReset)
	case c.ImageBackOffInitial < 0 || c.ImageBackOffMax < c.ImageBackOffInitial:
		return bad("image back-off %s..%s: need 0 <= initial <= max", c.ImageBackOffInitial, c.ImageBackOffMax)
	case c.GC.MinAge < 0:
		return bad("GC.MinAge %s is negative", c.GC.MinAge)
	case len(c.ClusterDNS) > maxDNSNameservers:
		return bad("ClusterDNS %v: at most %d nameservers", c.ClusterDNS, maxDNSNameservers)
	}
	for _, ip := range c.ClusterDNS {
		if net.ParseIP(ip) == nil {
			return bad("ClusterDNS %q is not an IP address", ip)
		}
	}
	if !isDNSDomain(c.ClusterDomain) {
		return bad("ClusterDomain %q is not a DNS-1123 subdomain", c.ClusterDomain)
	}
	return c.Swap.Validate()
}
