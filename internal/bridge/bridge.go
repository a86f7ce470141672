// Package bridge makes a jetlet fleet's nodes Kubernetes Nodes, so that a
// Kubernetes control plane places pods on them and kubectl reaches them
// (docs/kubernetes.md). Data flows one way each: the bus's node records
// become Nodes and Leases (virtual-kubelet's NodeController, one per
// node). The bridge reads the bus through the client package only.
package bridge

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"
	vklog "github.com/virtual-kubelet/virtual-kubelet/log"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/jetlet/jetlet/client"
)

// Config is what a Bridge needs besides its two connections.
type Config struct {
	// LeaseDuration is each Node's Lease's leaseDurationSeconds (renewed at
	// a quarter of it while the node's heartbeat is fresh); default 40 s,
	// kubelet's.
	LeaseDuration time.Duration
	// KubeletListen is where the kubelet API of the nodes is served,
	// host:port: each node on a port of its own, the first free from port
	// on (":10250"), or any free one with port 0; "" serves none. The paths
	// of the Summary API and the resource metrics do not name the node:
	// its port does. KubeletAddress is the address the Nodes advertise for
	// it (their InternalIP: kube-apiserver dials it), required with
	// KubeletListen.
	KubeletListen, KubeletAddress string
	// ClientCAFile is the CA whose client certificates the kubelet API
	// accepts (the cluster's: kube-apiserver's --kubelet-client-certificate
	// is signed by it), required with KubeletListen. TLSCertFile and
	// TLSKeyFile are its serving certificate; without them it makes one
	// for KubeletAddress, signed by itself.
	ClientCAFile, TLSCertFile, TLSKeyFile string
	// RetryDelay is the wait before a failed watch or Node registration is
	// tried again; default 2 s.
	RetryDelay time.Duration
	// Events is the client Events are sent with, a rate limit of its own;
	// default the bridge's client.
	Events kubernetes.Interface
	// LeaderElection chooses the bridge that bridges among those of a
	// fleet.
	LeaderElection LeaderElection
}

func (c *Config) setDefaults() {
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 40 * time.Second
	}
	if c.RetryDelay == 0 {
		c.RetryDelay = 2 * time.Second
	}
	c.LeaderElection.setDefaults()
}

// Validate checks the config.
func (c *Config) Validate() error {
	if c.LeaseDuration < 4*time.Second {
		return fmt.Errorf("bridge: lease duration %s: at least 4s (it is renewed at a quarter of it)", c.LeaseDuration)
	}
	if c.KubeletListen != "" {
		if c.KubeletAddress == "" || c.ClientCAFile == "" {
			return errors.New("bridge: the kubelet API needs the address the Nodes advertise (--kubelet-address) and the client CA (--client-ca-file)")
		}
		if _, _, err := kubeletListen(c.KubeletListen); err != nil {
			return err
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("bridge: --tls-cert-file and --tls-private-key-file go together")
	}
	return c.LeaderElection.validate()
}

// Bridge keeps a Node for each node of a jetlet fleet.
type Bridge struct {
	cfg    Config
	kube   kubernetes.Interface
	jetlet *client.Client
	log    zerolog.Logger
	// identity is this bridge's in the leader election's Lease.
	identity string

	// shared are the informers of the objects pods refer to (ConfigMaps,
	// Secrets, Services), shared by the nodes' pod controllers and configs,
	// which copies those the pods use to the bus; events sends the Events
	// they record. All are started by Run.
	shared  informers.SharedInformerFactory
	events  record.EventBroadcaster
	configs *configCopier // set by Run before any node is bridged
	tokens  *tokenIssuer

	// nodes are the bridged nodes by name, owned by Run's goroutine (the
	// node watch's callback).
	nodes map[string]*nodeBridge
	// kubeletTLS is the kubelet API's TLS, set by Run before any node is
	// bridged; nil without one.
	kubeletTLS *tls.Config
}

// maxKubeletPorts is how many ports from KubeletListen's are tried for a
// node's kubelet API.
const maxKubeletPorts = 1000

// eventSource is the component of the Events the bridge records.
const eventSource = "jetlet-bridge"

// podSyncWorkers is how many pods each node's pod controller syncs at
// once.
const podSyncWorkers = 10

// New makes a Bridge from kube (a client of the control plane) and jetlet
// (a client of the fleet's bus).
func New(kube kubernetes.Interface, jetlet *client.Client, log zerolog.Logger, cfg Config) (*Bridge, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var id string
	if cfg.LeaderElection.Enabled {
		var err error
		if id, err = identity(); err != nil {
			return nil, err
		}
	}
	return &Bridge{cfg: cfg, kube: kube, jetlet: jetlet, log: log.With().Str("component", "bridge").Logger(), identity: id,
		shared: informers.NewSharedInformerFactory(kube, 0), events: record.NewBroadcaster(), tokens: newTokenIssuer(kube, jetlet),
		nodes: map[string]*nodeBridge{}}, nil
}

// Run bridges until ctx ends, once it leads (with LeaderElection): it
// follows jetlet_nodes, making a Node of each node that comes and deleting
// the Node of each that stops. A Node outlives the bridge: a bridge
// started again, or another one elected, takes it over.
func (b *Bridge) Run(ctx context.Context) error {
	ctx = b.log.WithContext(vklog.WithLogger(ctx, vkLogger{b.log}))
	// What can fail comes first, a standby's too: nothing has started yet.
	if b.cfg.KubeletListen != "" {
		var err error
		if b.kubeletTLS, err = kubeletTLS(b.cfg.TLSCertFile, b.cfg.TLSKeyFile, b.cfg.ClientCAFile, b.cfg.KubeletAddress); err != nil {
			return err
		}
	}
	if !b.cfg.LeaderElection.Enabled {
		return b.bridge(ctx)
	}
	return b.lead(ctx, b.bridge)
}

// bridge is Run's work, the leader's.
func (b *Bridge) bridge(ctx context.Context) error {
	// The informers are registered before the factory starts; the nodes
	// are bridged once they hold what there is.
	core := b.shared.Core().V1()
	b.configs = newConfigCopier(b.jetlet, core.ConfigMaps().Lister(), core.Secrets().Lister())
	for _, h := range []struct {
		informer cache.SharedIndexInformer
		secret   bool
	}{{core.ConfigMaps().Informer(), false}, {core.Secrets().Informer(), true}} {
		if _, err := h.informer.AddEventHandler(b.configs.handler(ctx, h.secret)); err != nil {
			return err
		}
	}
	core.Services().Informer()

	sink := b.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cmp.Or(b.cfg.Events, b.kube).CoreV1().Events("")})
	defer sink.Stop()
	b.shared.Start(ctx.Done())
	defer b.shared.Shutdown()
	b.shared.WaitForCacheSync(ctx.Done())
	var background sync.WaitGroup
	defer background.Wait()
	background.Go(func() { b.tokens.renew(ctx) })
	defer b.stopAll()
	b.retry(ctx, "watching jetlet_nodes", func(ctx context.Context) error {
		return b.jetlet.WatchNodes(ctx, func(n *client.Node) error {
			b.onNode(ctx, n)
			return nil
		})
	})
	return nil
}

// listenKubelet listens for a node's kubelet API: on the first free port
// from KubeletListen's, or on any with port 0.
func (b *Bridge) listenKubelet() (net.Listener, error) {
	host, first, err := kubeletListen(b.cfg.KubeletListen)
	if err != nil {
		return nil, err
	}
	if first == 0 {
		return net.Listen("tcp", b.cfg.KubeletListen)
	}
	for p := first; p < first+maxKubeletPorts && p <= 65535; p++ {
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("bridge: no free port for a kubelet API from %s on (%d tried)", b.cfg.KubeletListen, maxKubeletPorts)
}

// kubeletListen splits --kubelet-listen into its host and first port.
func kubeletListen(listen string) (host string, port int, err error) {
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("bridge: --kubelet-listen %q: %w", listen, err)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bridge: --kubelet-listen %q: the port is not a port number", listen)
	}
	return host, port, nil
}

// retry runs fn until ctx ends, again after RetryDelay each time it
// returns early, saying why.
func (b *Bridge) retry(ctx context.Context, what string, fn func(context.Context) error) {
	for {
		err := fn(ctx)
		if ctx.Err() != nil {
			return
		}
		zerolog.Ctx(ctx).Warn().Err(err).Dur("retry_in", b.cfg.RetryDelay).Msg(what)
		if !sleep(ctx, b.cfg.RetryDelay) {
			return
		}
	}
}

// onNode brings n's Node in line with its record: made on its first
// record, fed the later ones, deleted once the node stopped cleanly or was
// removed (its record deleted), also when that happened while no bridge
// ran (the watch starts with the deletes the bucket keeps).
func (b *Bridge) onNode(ctx context.Context, n *client.Node) {
	nb := b.nodes[n.Name]
	if n.Record == nil {
		if nb != nil {
			nb.stop()
			delete(b.nodes, n.Name)
		}
		b.deleteNode(ctx, n.Name)
		return
	}
	if nb == nil {
		nb = newNodeBridge(ctx, b, n.Record)
		b.nodes[n.Name] = nb
		go nb.run()
		b.log.Info().Str("node", n.Name).Msg("bridging node")
		return
	}
	nb.update(n.Record)
}

// deleteNode deletes the Node of a node that stopped; its Lease goes with
// it (the Lease's owner is the Node).
func (b *Bridge) deleteNode(ctx context.Context, name string) {
	err := b.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	switch {
	case err == nil:
		b.log.Info().Str("node", name).Msg("node stopped: Node deleted")
	case apierrors.IsNotFound(err):
	default:
		b.log.Error().Err(err).Str("node", name).Msg("node stopped: deleting its Node")
	}
}

func (b *Bridge) stopAll() {
	for name, nb := range b.nodes {
		nb.stop()
		delete(b.nodes, name)
	}
}

// sleep waits d or until ctx ends, and says whether ctx is still alive.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
