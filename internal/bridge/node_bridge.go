package bridge

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

// nodeBridge is one jetlet node's Node and Lease: virtual-kubelet's
// NodeController, its ping the node's heartbeat (a stale heartbeat stops
// the Lease's renewal, and the control plane's node lifecycle controller
// then marks the Node Ready Unknown), its status the node's records.
type nodeBridge struct {
	name string
	b    *Bridge

	// mu guards rec, notify and sent: update writes rec from the node
	// watch, Ping reads it from the NodeController's ping loop, and feed
	// hands Nodes to notify.
	mu     sync.Mutex
	rec    *schemas.NodeRecord
	notify func(*corev1.Node) // the running NodeController's, nil before
	sent   *corev1.Node       // the last Node handed to notify

	// kubeletPort is the port of the node's kubelet API (0: none), set by
	// run before it starts the controllers that read it.
	kubeletPort int32

	changed chan struct{}   // a new record to feed (1-buffered: a wake-up)
	ctx     context.Context // run's: ends at stop
	cancel  context.CancelFunc
	done    chan struct{} // closed when run has returned
}

var _ node.NodeProvider = (*nodeBridge)(nil)

func newNodeBridge(ctx context.Context, b *Bridge, rec *schemas.NodeRecord) *nodeBridge {
	nb := &nodeBridge{name: rec.Node, b: b, rec: rec, changed: make(chan struct{}, 1), done: make(chan struct{})}
	nb.ctx, nb.cancel = context.WithCancel(ctx)
	return nb
}

// run keeps the node's NodeController running until stop: one that fails
// to register the Node (the node's heartbeat already stale, the API server
// away) is made again after a delay.
func (nb *nodeBridge) run() {
	defer close(nb.done)
	log := nb.b.log.With().Str("node", nb.name).Logger()
	ctx := log.WithContext(nb.ctx)
	var pods sync.WaitGroup
	defer pods.Wait()
	if nb.b.kubeletTLS != nil {
		ln, err := nb.b.listenKubelet()
		for ; err != nil; ln, err = nb.b.listenKubelet() {
			log.Warn().Err(err).Dur("retry_in", nb.b.cfg.RetryDelay).Msg("listening for the kubelet API")
			if !sleep(ctx, nb.b.cfg.RetryDelay) {
				return
			}
		}
		nb.kubeletPort = int32(ln.Addr().(*net.TCPAddr).Port)
		pods.Go(func() {
			a := &kubeletAPI{node: nb.name, kube: nb.b.kube, jetlet: nb.b.jetlet}
			if err := a.serve(ctx, ln, nb.b.kubeletTLS); err != nil {
				log.Error().Err(err).Msg("the kubelet API stopped")
			}
		})
	}
	pods.Go(func() { nb.b.retry(ctx, "running the pod controller", nb.runPods) })
	nb.b.retry(ctx, "registering the Node", nb.runController)
}

// runPods runs virtual-kubelet's PodController for the Node's pods (an
// informer of its own, on spec.nodeName), and once it is ready, the watch
// of the node's statuses that feeds it and the follow of its lifecycle
// events (from now on) into Events, until ctx ends.
func (nb *nodeBridge) runPods(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(nb.b.kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nb.name).String()
	}))
	podInformer := factory.Core().V1().Pods()
	pods := newNodePods(nb.name, nb.b.jetlet, nb.b.kube, podInformer.Lister(), nb.record, nb.b.configs, nb.b.tokens)
	recorder := nb.b.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: eventSource, Host: nb.name})
	events := &eventsFollower{pods: pods, recorder: recorder, since: time.Now()}
	shared := nb.b.shared.Core().V1()
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient: nb.b.kube.CoreV1(), PodInformer: podInformer, Provider: pods,
		EventRecorder:     recorder,
		ConfigMapInformer: shared.ConfigMaps(), SecretInformer: shared.Secrets(), ServiceInformer: shared.Services(),
		// The node resolves env from its own copies of ConfigMaps and
		// Secrets: the intent carries the spec as written.
		SkipDownwardAPIResolution: true,
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	var feeds sync.WaitGroup
	defer feeds.Wait()
	afterReady := func(what string, fn func(context.Context) error) {
		feeds.Go(func() {
			select {
			case <-pc.Ready():
				nb.b.retry(ctx, what, fn)
			case <-ctx.Done():
			}
		})
	}
	afterReady("watching the node's statuses", pods.watchStatuses)
	afterReady("following the node's events", events.follow)
	return pc.Run(ctx, podSyncWorkers)
}

// record is the node's latest record.
func (nb *nodeBridge) record() *schemas.NodeRecord {
	nb.mu.Lock()
	defer nb.mu.Unlock()
	return nb.rec
}

func (nb *nodeBridge) runController(ctx context.Context) error {
	nb.mu.Lock()
	first := nodeOf(nb.rec, nb.kubeletPort, nb.b.cfg.KubeletAddress)
	nb.notify, nb.sent = nil, first
	nb.mu.Unlock()
	seconds := int32(nb.b.cfg.LeaseDuration / time.Second)
	nc, err := node.NewNodeController(nb, first, nb.b.kube.CoreV1().Nodes(),
		node.WithNodeEnableLeaseV1(nb.b.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease), seconds),
		node.WithNodePingInterval(nb.b.cfg.LeaseDuration/4))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-nc.Ready():
			nb.feed(ctx)
		case <-ctx.Done():
		}
	}()
	return nc.Run(ctx)
}

// feed hands the NodeController each record that changes the Node, until
// ctx ends. (Its status channel holds one Node and is read until the
// controller stops: a hand-over at that moment may block this goroutine
// for good, which only two changes within the last API call can cause.)
func (nb *nodeBridge) feed(ctx context.Context) {
	for {
		nb.mu.Lock()
		n := nodeOf(nb.rec, nb.kubeletPort, nb.b.cfg.KubeletAddress)
		notify := nb.notify
		if notify != nil && sameNode(n, nb.sent) {
			notify = nil
		}
		if notify != nil {
			nb.sent = n
		}
		nb.mu.Unlock()
		if notify != nil {
			notify(n)
		}
		select {
		case <-ctx.Done():
			return
		case <-nb.changed:
		}
	}
}

// update takes a new record of the node.
func (nb *nodeBridge) update(rec *schemas.NodeRecord) {
	nb.mu.Lock()
	nb.rec = rec
	nb.mu.Unlock()
	select {
	case nb.changed <- struct{}{}:
	default:
	}
}

// stop ends run and waits for it.
func (nb *nodeBridge) stop() {
	nb.cancel()
	<-nb.done
}

// Ping fails while the node's heartbeat is stale: the NodeController then
// neither renews the Lease nor writes the status.
func (nb *nodeBridge) Ping(context.Context) error {
	nb.mu.Lock()
	rec := nb.rec
	nb.mu.Unlock()
	now := time.Now()
	if n := (&client.Node{Name: nb.name, Record: rec}); !n.Live(now) {
		return fmt.Errorf("node %s: %s", nb.name, n.NotLive(now))
	}
	return nil
}

// NotifyNodeStatus takes the NodeController's callback for new statuses.
func (nb *nodeBridge) NotifyNodeStatus(_ context.Context, cb func(*corev1.Node)) {
	nb.mu.Lock()
	nb.notify = cb
	nb.mu.Unlock()
}
