package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/consumer"
	"github.com/jetlet/jetlet/consumer/checkpoint"
	"github.com/jetlet/jetlet/consumer/configcache"
	"github.com/jetlet/jetlet/consumer/results"
	"github.com/jetlet/jetlet/consumer/status"
	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/internal/logind"
	"github.com/jetlet/jetlet/internal/periodic"
	"github.com/jetlet/jetlet/internal/podcgroups"
	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/reconcile/admission"
	"github.com/jetlet/jetlet/reconcile/eviction"
	"github.com/jetlet/jetlet/reconcile/imagegc"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/nodeshutdown"
	"github.com/jetlet/jetlet/reconcile/nodestatus"
	"github.com/jetlet/jetlet/reconcile/pleg"
	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/reconcile/prober"
	"github.com/jetlet/jetlet/reconcile/pullmanager"
	"github.com/jetlet/jetlet/reconcile/stats"
	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/containerlogs"
	"github.com/jetlet/jetlet/runtime/nodeservice"
	"github.com/jetlet/jetlet/runtime/probe"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// gcPeriod is how often dead containers and gone pods are collected, as
// kubelet's container GC period.
const gcPeriod = time.Minute

// eventSpoolDir, in the data dir, keeps the events queued and not yet
// stored (events.Config.SpoolDir).
const eventSpoolDir = "outbox/events"

// rederiveCheck is how often jetlet looks whether events were dropped and,
// once NATS is back, derives the facts again.
const rederiveCheck = 5 * time.Second

// The CRI client is the node service's runtime as it is.
var (
	_ nodeservice.Runtime  = (*runtime.Client)(nil)
	_ nodeservice.Streamer = (*runtime.Client)(nil)
)

// The CRI client is reconcile's runtime as it is: reconcile declares its
// roles with the client's own signatures.
var _ reconcile.Runtime = (*runtime.Client)(nil)

// runtime/probe runs reconcile's probe and hook handlers without importing
// reconcile: the outcome type is shared through runtime/probe/outcome.
var _ kubecontainer.HandlerRunner = (*probe.Runner)(nil)

// servePipeline runs the node's pipeline (publishers, relist, pod workers,
// consumer, garbage collection, heartbeat, the logs and exec service) until
// ctx is done, then drains it (see drain).
func (a *agent) servePipeline(ctx context.Context, js jetstream.JetStream, client *runtime.Client, reg prometheus.Registerer) error {
	p := &pipeline{log: logger.With().Str("node", a.cfg.node).Logger(), startedAt: time.Now().UTC()}
	if err := a.buildPublishers(p, js, reg); err != nil {
		return err
	}
	if err := a.buildPodSync(ctx, p, js, client, reg); err != nil {
		return err
	}
	if p.podCgroups != nil {
		defer p.podCgroups.Close()
	}
	if err := a.buildNodeManagers(p, client); err != nil {
		return err
	}
	if err := a.buildServices(ctx, p, js, client, reg); err != nil {
		return err
	}
	a.attached.Store(p.consumer)
	return a.runPipeline(ctx, p, js, client)
}

// pipeline is the node's parts, in the order they are built.
type pipeline struct {
	log       zerolog.Logger
	startedAt time.Time

	answers  *results.ResultPublisher
	events   *events.EventPublisher
	statuses *status.StatusWriter
	emit     kubecontainer.Emitter // events and statuses, as reconcile emits them

	node     *nodeInfo
	objects  *configcache.Objects
	probes   *prober.Prober
	relister *pleg.Relister
	workers  *podworkers.Workers
	imageGC  *imagegc.ImageGCManager
	eviction *eviction.Manager
	shutdown *nodeshutdown.Manager

	// podCgroups makes the pods' cgroups on a CRI runtime; nil on the
	// embedded runtime.
	podCgroups *podcgroups.Manager

	// userNamespaces: the runtime said at start it runs pods in user
	// namespaces of their own.
	userNamespaces bool
	// imagePulls keeps which credentials pulled each image.
	imagePulls *pullmanager.Manager
	// declaredFeatures are the node's declared features (its record's),
	// fixed at start.
	declaredFeatures []string

	// usage measures the node for its record, summaries its pods for the
	// node service's stats endpoint, each with its own CPU windows
	// (reconcile/stats).
	usage, summaries *stats.Provider

	rotation *containerlogs.Rotator
	consumer *consumer.Consumer
	nodeSvc  *nodeservice.Service
}

// buildPublishers makes the three publishers: results (synchronous), events
// and statuses (in the background); they count their failures together.
func (a *agent) buildPublishers(p *pipeline, js jetstream.JetStream, reg prometheus.Registerer) (err error) {
	failures := natsjs.NewPublishFailures(reg)
	if p.answers, err = results.New(js, results.Config{
		Node:          a.cfg.node,
		SubjectPrefix: a.cfg.streams.SubjectPrefix,
		Failures:      failures,
		Denials:       &a.denials,
	}); err != nil {
		return err
	}
	if p.events, err = events.New(js, events.Config{
		Node:          a.cfg.node,
		SubjectPrefix: a.cfg.streams.SubjectPrefix,
		Logger:        p.log,
		Metrics:       events.NewMetrics(reg),
		Failures:      failures,
		Denials:       &a.denials,
		SpoolDir:      filepath.Join(a.cfg.dataDir, eventSpoolDir),
	}); err != nil {
		return err
	}
	if p.statuses, err = status.New(js, status.Config{
		Node:                a.cfg.node,
		TerminatedStatusTTL: a.cfg.streams.TerminatedStatusTTL,
		Logger:              p.log,
		Failures:            failures,
		Denials:             &a.denials,
	}); err != nil {
		return err
	}
	p.emit = podworkers.IntentEmitter(eventsAndStatuses{p.events, p.statuses})
	return nil
}

// buildPodSync makes kubelet's half: the prober, the runtime manager, the
// relist and the pod workers.
func (a *agent) buildPodSync(ctx context.Context, p *pipeline, js jetstream.JetStream, client *runtime.Client, reg prometheus.Registerer) (err error) {
	hostIP := nodeIP()
	p.log.Info().Str("node_ip", hostIP).Msg("node address: the IP of hostNetwork pods and the downward API's status.hostIP")
	if p.node, err = newNode(a.cfg, hostIP); err != nil {
		return err
	}
	// The ConfigMaps and the node's Secrets, from their buckets.
	if p.objects, err = configcache.New(js, a.cfg.node, p.node.xkey, configcache.Config{Logger: p.log}); err != nil {
		return err
	}
	// One handler runner for the probes and the lifecycle hooks.
	handlers := probe.New(client, probe.Config{Version: cli.Version()})
	if p.probes, err = prober.New(handlers, p.emit, prober.Config{Node: a.cfg.node, Logger: p.log}); err != nil {
		return err
	}
	usernsRange, err := userNamespaceRange(p.log)
	if err != nil {
		return err
	}
	p.userNamespaces = runtimeSupportsUserNamespaces(ctx, client, p.log)
	p.declaredFeatures = nodestatus.DeclaredFeatures(nodestatus.FeatureConfig{UserNamespaces: p.userNamespaces})
	byDefault := userNamespacesByDefault(a.cfg.defaultHostUsers, p.userNamespaces, p.log)
	if p.podCgroups, err = a.startPodCgroups(ctx, client, p.node, p.log); err != nil {
		return err
	}
	swap, err := memorySwap(a.cfg.swapBehavior, p.node)
	if err != nil {
		return err
	}
	p.log.Info().Str("behavior", string(swap.Behavior)).Bool("accounted", swap.Accounted).Int64("node_swap_bytes", swap.NodeSwap).Msg("containers' swap (--memory-swap-behavior)")
	// The records of which credentials pulled each image, with what the
	// last run left mid-pull settled before any pull.
	p.imagePulls, err = pullmanager.New(pullmanager.Config{
		Dir:       filepath.Join(a.cfg.dataDir, pullmanager.DirName),
		Policy:    pullmanager.Policy(a.cfg.imagePullVerification),
		Allowlist: a.cfg.preloadedImagesVerifyAllowlist,
		Logger:    p.log,
	})
	if err != nil {
		return err
	}
	p.imagePulls.Initialize(ctx, client)
	rcfg := reconcile.Config{
		NodeName:        a.cfg.node,
		NodeIP:          hostIP,
		PodNetworkDown:  a.podNetworkDown,
		NodeAllocatable: p.node.allocatable,
		DataDir:         a.cfg.dataDir,
		AllowPrivileged: p.node.level == admission.LevelPrivileged,
		Credentials:     a.credentials,
		ImagePulls:      p.imagePulls,
		Objects:         p.objects,
		GC:              reconcile.GCPolicy{MaxPerPodContainer: a.cfg.maxDeadPerContainer},
		Liveness:        p.probes.Liveness(),
		Readiness:       p.probes.Readiness(),
		Startup:         p.probes.Startup(),
		Handlers:        handlers,
		ClusterDNS:      a.cfg.clusterDNS,
		ClusterDomain:   a.cfg.clusterDomain,
		ResolvConf:      a.cfg.resolvConf,
		UserNamespaces:  usernsRange,
		Swap:            swap,
		Logger:          p.log,

		UserNamespacesByDefault: byDefault,
	}
	if p.podCgroups != nil {
		rcfg.PodCgroups = p.podCgroups
	}
	kuberuntime, err := reconcile.New(client, p.emit, rcfg)
	if err != nil {
		return err
	}
	if p.relister, err = pleg.New(kuberuntime, p.events, pleg.Config{
		Node:            a.cfg.node,
		Period:          a.cfg.relistPeriod,
		EventedPeriod:   a.cfg.eventedRelistPeriod,
		ContainerEvents: containerEvents(client),
		Logger:          p.log,
		Registerer:      reg,
	}); err != nil {
		return err
	}
	p.workers, err = podworkers.New(kuberuntime, p.relister, p.emit, p.statuses, podworkers.Config{
		Node:         a.cfg.node,
		Workers:      a.cfg.workers,
		ResyncPeriod: a.cfg.resyncPeriod,
		GCPeriod:     gcPeriod,
		Prober:       p.probes,
		Allocations:  kuberuntime,
		// The eviction and shutdown managers are made below, before anything runs.
		Admission: func() admission.Node {
			_, down := p.shutdown.ShuttingDown()
			return p.node.forAdmission(p.eviction.Pressure(), down)
		},
		Logger:           p.log,
		Registerer:       reg,
		DeclaredFeatures: p.declaredFeatures,
	})
	return err
}

// buildNodeManagers makes what keeps the node healthy, as kubelet's image
// manager, eviction manager and node shutdown manager: image garbage
// collection; node-pressure eviction, which reclaims unused images and dead
// containers first, then evicts pods through the pod workers; and the
// graceful shutdown, which stops the pods through them before the host goes
// down.
func (a *agent) buildNodeManagers(p *pipeline, client *runtime.Client) (err error) {
	if p.imageGC, err = imagegc.New(client, imagegc.Config{Policy: a.cfg.nodeStatus.imageGC, PullRecords: p.imagePulls, Logger: p.log}); err != nil {
		return err
	}
	observer, err := eviction.NewNodeObserver(client, eviction.NodeObserverConfig{DataDir: a.cfg.dataDir, Logger: p.log})
	if err != nil {
		return err
	}
	reclaim := struct {
		eviction.ImageGC
		eviction.ContainerGC
	}{p.imageGC, p.workers}
	p.eviction, err = eviction.New(observer, reclaim, p.workers, p.workers, eviction.Config{
		Thresholds:               a.cfg.nodeStatus.thresholds,
		PressureTransitionPeriod: a.cfg.nodeStatus.evictionTransition,
		MaxPodGracePeriodSeconds: a.cfg.nodeStatus.evictionMaxPodGrace,
		Logger:                   p.log,
	})
	if err != nil {
		return err
	}
	connect := func() (nodeshutdown.Logind, error) {
		c, err := logind.Connect(logind.DefaultConfDir)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	flush := func(ctx context.Context) error { return flushAll(ctx, p.events, p.statuses) }
	p.shutdown, err = nodeshutdown.New(connect, p.workers, p.workers, flush, a.cfg.nodeStatus.shutdown, p.log)
	return err
}

// buildServices makes what serves the node: log rotation, the intent
// consumer, the logs and exec service.
func (a *agent) buildServices(ctx context.Context, p *pipeline, js jetstream.JetStream, client *runtime.Client, reg prometheus.Registerer) (err error) {
	logCfg := a.cfg.containerLogs
	logCfg.Logger = p.log
	if p.rotation, err = containerlogs.New(client, logCfg); err != nil {
		return err
	}
	// Only root mounts the tmpfs of an emptyDir of medium Memory; checked once.
	noTmpfs := os.Geteuid() != 0
	if noTmpfs {
		p.log.Info().Msg("not running as root: pods with an emptyDir of medium Memory are rejected")
	}
	if p.consumer, err = consumer.New(js, p.answers, p.events, p.workers, consumer.Config{
		Node:            a.cfg.node,
		SubjectPrefix:   a.cfg.streams.SubjectPrefix,
		IntentsStream:   schemas.IntentsStream(a.cfg.node, a.cfg.streams.IntentPartitions),
		Workers:         a.cfg.workers,
		DurableReplicas: a.cfg.intakeReplicas,
		// On one server whose streams have one replica, memory would lose
		// the durable at every restart of jetlet's embedded server.
		DurableInMemory:  a.cfg.intakeReplicas == 1 && a.cfg.streams.Replicas > 1,
		NoMemoryEmptyDir: noTmpfs,
		NoUserNamespaces: !p.userNamespaces,
		Logger:           p.log,
		Denials:          &a.denials,
		Registerer:       reg,
		Checkpoint:       checkpoint.New(a.cfg.dataDir),
		BusUp:            a.busUp,
	}); err != nil {
		return err
	}
	if p.usage, p.summaries, err = newStatsProviders(a.cfg.node, client); err != nil {
		return err
	}
	p.nodeSvc, err = nodeservice.New(client, nodeservice.Config{
		Node:          a.cfg.node,
		SubjectPrefix: a.cfg.streams.SubjectPrefix,
		Cordon:        p.node.cordon.Set,
		Plan:          p.plan,
		Summary:       p.summaries.Summary,
		WillRestart:   p.workers.WillRestart,
		StreamOpened:  p.events.Emit,
		Logger:        p.log,
		Registerer:    reg,
	})
	return err
}

// runPipeline starts the background parts, runs the consumer until ctx is
// done or it fails, then drains.
func (a *agent) runPipeline(ctx context.Context, p *pipeline, js jetstream.JetStream, client *runtime.Client) error {
	// The publishers and the relist outlive ctx: the drain still syncs
	// (from the cache) and publishes.
	pubCtx, stopPub := context.WithCancel(context.WithoutCancel(ctx))
	relistCtx, stopRelist := context.WithCancel(context.WithoutCancel(ctx))
	var bg, syncing sync.WaitGroup
	bg.Go(func() { p.events.Run(pubCtx) })
	bg.Go(func() { p.statuses.Run(pubCtx) })
	bg.Go(func() { p.relister.Run(relistCtx) })
	// These end with the consumer, which can fail on its own (a consumer
	// NATS does not allow).
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	syncing.Go(func() { p.workers.Run(bgCtx, a.cfg.shutdownTimeout) })
	bg.Go(func() {
		if !a.awaitBus(bgCtx) {
			return
		}
		if err := p.objects.Run(bgCtx); err != nil {
			p.log.Error().Err(err).Msg("ConfigMaps and Secrets are no longer read: pods that refer to them wait")
		}
	})
	bg.Go(func() { wakeOnObjectChanges(bgCtx, p.objects, p.workers) })
	bg.Go(func() { p.imageGC.Run(bgCtx) })
	bg.Go(func() { p.eviction.Run(bgCtx) })
	bg.Go(func() {
		if err := p.shutdown.Run(bgCtx); err != nil {
			p.log.Error().Err(err).Msg("graceful node shutdown is off: the host would shut down without stopping the pods first")
		}
	})
	changed := make(chan struct{}, 1)
	bg.Go(func() {
		fanIn(bgCtx, changed, p.workers.AllocationChanged(), p.eviction.Changed(), p.node.cordon.Changed(), p.shutdown.Changed())
	})
	bg.Go(func() {
		if a.awaitBus(bgCtx) {
			status.RunHeartbeat(bgCtx, js, status.HeartbeatPeriod, func() schemas.NodeRecord { return a.nodeRecord(bgCtx, p, client) }, changed, p.log)
		}
	})
	bg.Go(func() { rederiveAfterDrops(bgCtx, p.events, p.relister, a) })
	bg.Go(func() { p.rotation.Run(bgCtx) })
	bg.Go(func() {
		if a.awaitBus(bgCtx) {
			a.serveImageRegistry(bgCtx, js)
		}
	})
	bg.Go(func() {
		if !a.awaitBus(bgCtx) {
			return
		}
		if err := p.nodeSvc.Run(bgCtx, js.Conn()); err != nil {
			p.log.Warn().Err(err).Msg("node service (logs, exec) not served")
		}
	})

	runErr := p.consumer.Run(ctx, a.cfg.shutdownTimeout)
	stopBG()
	syncing.Wait() // the background syncs drain beside the consumer's
	a.drain(p, js, stopRelist, func() { stopPub(); bg.Wait() })
	return runErr
}

// drain ends the pipeline once the consumer and the syncs have: probes stop
// (no sync starts them any more), the relist stops, queued events and
// statuses are flushed (up to the shutdown timeout), the publishers stop,
// and the node's heartbeat record is removed.
func (a *agent) drain(p *pipeline, js jetstream.JetStream, stopRelist func(), stopPublishers func()) {
	p.probes.Stop()
	stopRelist()
	flushCtx, cancel := context.WithTimeout(context.Background(), a.cfg.shutdownTimeout)
	defer cancel()
	if err := flushAll(flushCtx, p.events, p.statuses); err != nil {
		p.log.Warn().Err(err).Msg("not every event or status was published before shutdown; the next relist derives them again")
	}
	stopPublishers()
	// A denied delete fails at once rather than at the flush deadline.
	removeCtx, stopWatch := a.denials.Watch(flushCtx, "$KV."+schemas.BucketNodes+"."+a.cfg.node)
	defer stopWatch()
	if err := status.RemoveHeartbeat(removeCtx, js, a.cfg.node); err != nil {
		p.log.Warn().Err(err).Msg("node record not removed from " + schemas.BucketNodes + "; it expires with the bucket's TTL")
	}
}

// awaitBus waits until the streams are provisioned: false when ctx ended
// first.
func (a *agent) awaitBus(ctx context.Context) bool {
	select {
	case <-a.busUp:
		return true
	case <-ctx.Done():
		return false
	}
}

// wakeOnObjectChanges syncs the pods that refer to a ConfigMap or Secret
// that changed, until ctx is done: their mounted files follow it, and a
// container waiting for it starts, without a new intent.
func wakeOnObjectChanges(ctx context.Context, objs *configcache.Objects, workers *podworkers.Workers) {
	for {
		select {
		case <-ctx.Done():
			return
		case changed := <-objs.Changed():
			workers.WakeWhere(func(pod *corev1.Pod) bool {
				return slices.ContainsFunc(reconcile.ReferencedObjects(pod), func(ref kubecontainer.ObjectRef) bool {
					return slices.Contains(changed, ref)
				})
			})
		}
	}
}

// fanIn signals out (without blocking, coalesced) for each signal of ins,
// until ctx is done.
func fanIn(ctx context.Context, out chan<- struct{}, ins ...<-chan struct{}) {
	var wg sync.WaitGroup
	for _, in := range ins {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-in:
				}
				select {
				case out <- struct{}{}:
				default:
				}
			}
		})
	}
	wg.Wait()
}

// nodeRecord is what the heartbeat stores in jetlet_nodes.
func (a *agent) nodeRecord(ctx context.Context, p *pipeline, client *runtime.Client) schemas.NodeRecord {
	v := client.RuntimeVersion()
	rec := schemas.NodeRecord{
		Node:              a.cfg.node,
		JetletVersion:     cli.Version(),
		RuntimeName:       v.GetRuntimeName(),
		RuntimeVersion:    v.GetRuntimeVersion(),
		RuntimeAPIVersion: v.GetRuntimeApiVersion(),
		RuntimeEndpoint:   client.Endpoint(),
		Isolation:         a.isolation,
		Pods:              p.workers.PodCounts(),
		StartedAt:         p.startedAt,
	}
	shutdownSince, _ := p.shutdown.ShuttingDown()
	p.node.record(&rec, p.workers.Allocated(), p.eviction.Conditions(), a.runtimeNetwork.Load(), p.startedAt, shutdownSince)
	rec.Images = p.imageGC.NodeImages(ctx)
	rec.Usage = nodeUsage(p.usage, p.log)
	rec.DeclaredFeatures = p.declaredFeatures
	return rec
}

// eventsAndStatuses is the events publisher as reconcile's Emitter. Its
// Flush, which garbage collection calls before it removes what a pod's facts
// are derived from, waits for the queued statuses as well as the events, as
// it did when one publisher held both.
type eventsAndStatuses struct {
	*events.EventPublisher
	statuses *status.StatusWriter
}

func (e eventsAndStatuses) Flush(ctx context.Context) error {
	return flushAll(ctx, e.EventPublisher, e.statuses)
}

// flushAll waits until each of fs has stored what it holds, or ctx is done:
// all at once, so that each has until ctx's deadline.
func flushAll(ctx context.Context, fs ...interface{ Flush(context.Context) error }) error {
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Go(func() { errs[i] = f.Flush(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rederiveAfterDrops re-emits the facts the relist knows once NATS is back,
// when events had to be dropped while it was away.
func rederiveAfterDrops(ctx context.Context, pub *events.EventPublisher, relister *pleg.Relister, a *agent) {
	pending := false
	periodic.Every(ctx, rederiveCheck, func() {
		pending = pub.TakeDropped() || pending
		if nc := a.nc.Load(); pending && nc != nil && nc.IsConnected() {
			relister.Rederive(ctx)
			pending = false
		}
	})
}

// containerEvents turns the CRI event stream into the relist's trigger.
func containerEvents(client *runtime.Client) pleg.ContainerEventsFunc {
	return func(ctx context.Context, ready, event func()) error {
		err := client.FollowContainerEvents(ctx, ready, func(*runtimeapi.ContainerEventResponse) { event() })
		if errors.Is(err, runtime.ErrUnimplemented) {
			return errors.Join(pleg.ErrEventsUnsupported, err)
		}
		return err
	}
}
