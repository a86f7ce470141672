package agent

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/consumer"
	"github.com/jetlet/jetlet/consumer/results"
	"github.com/jetlet/jetlet/consumer/status"
	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/reconcile"
	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/reconcile/pleg"
	"github.com/jetlet/jetlet/reconcile/podworkers"
	"github.com/jetlet/jetlet/reconcile/prober"
	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/containerlogs"
	"github.com/jetlet/jetlet/runtime/nodeservice"
	"github.com/jetlet/jetlet/runtime/probe"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/bus"
)

// gcPeriod is how often dead containers and gone pods are collected, as
// kubelet's container GC period.
const gcPeriod = time.Minute

// rederiveCheck is how often jetlet looks whether events were dropped and,
// once NATS is back, derives the facts again.
const rederiveCheck = 5 * time.Second

// The CRI client is the node service's runtime as it is.
var _ nodeservice.Runtime = (*runtime.Client)(nil)

// The CRI client is reconcile's runtime as it is: reconcile declares its
// roles with the client's own signatures.
var _ reconcile.Runtime = (*runtime.Client)(nil)

// runtime/probe runs reconcile's probe and hook handlers without importing
// reconcile: the outcome type is shared through runtime/probe/outcome.
var _ kubecontainer.HandlerRunner = (*probe.Runner)(nil)

// servePipeline runs the node's pipeline (publishers, relist, pod workers,
// consumer, garbage collection, heartbeat, the logs and exec service) until ctx is done, then drains it:
// in-flight syncs finish (up to the shutdown timeout), unanswered intents go
// back to JetStream, queued events and statuses are flushed, and the node's
// heartbeat record is removed.
func (a *agent) servePipeline(ctx context.Context, js jetstream.JetStream, client *runtime.Client, reg prometheus.Registerer) error {
	log := logger.With().Str("node", a.cfg.node).Logger()
	// The three publishers: results (synchronous), events and statuses (in
	// the background); they count their failures together.
	failures := bus.NewPublishFailures(reg)
	answers, err := results.New(js, results.Config{
		Node:          a.cfg.node,
		SubjectPrefix: a.cfg.streams.SubjectPrefix,
		Failures:      failures,
		Denials:       &a.denials,
	})
	if err != nil {
		return err
	}
	pub, err := events.New(js, events.Config{
		Node:          a.cfg.node,
		SubjectPrefix: a.cfg.streams.SubjectPrefix,
		Logger:        log,
		Metrics:       events.NewMetrics(reg),
		Failures:      failures,
		Denials:       &a.denials,
	})
	if err != nil {
		return err
	}
	statuses, err := status.New(js, status.Config{
		Node:                a.cfg.node,
		TerminatedStatusTTL: a.cfg.streams.TerminatedStatusTTL,
		Logger:              log,
		Failures:            failures,
	})
	if err != nil {
		return err
	}
	emit := podworkers.IntentEmitter(eventsAndStatuses{pub, statuses})
	allocatable, err := nodeAllocatable(a.cfg.dataDir)
	if err != nil {
		return err
	}
	// One handler runner for the probes and the lifecycle hooks.
	handlers := probe.New(client, probe.Config{Version: cli.Version()})
	probes, err := prober.New(handlers, emit, prober.Config{
		Node:   a.cfg.node,
		Logger: log,
	})
	if err != nil {
		return err
	}
	hostIP := nodeIP()
	log.Info().Str("node_ip", hostIP).Msg("node address: the IP of hostNetwork pods and the downward API's status.hostIP")
	mgr, err := reconcile.New(client, emit, reconcile.Config{
		NodeName:        a.cfg.node,
		NodeIP:          hostIP,
		NodeAllocatable: allocatable,
		DataDir:         a.cfg.dataDir,
		AllowPrivileged: a.cfg.allowPrivileged,
		Credentials:     a.credentials,
		GC:              reconcile.GCPolicy{MaxPerPodContainer: a.cfg.maxDeadPerContainer},
		Liveness:        probes.Liveness(),
		Readiness:       probes.Readiness(),
		Startup:         probes.Startup(),
		Handlers:        handlers,
		Logger:          log,
	})
	if err != nil {
		return err
	}
	relister, err := pleg.New(mgr, pub, pleg.Config{
		Node:            a.cfg.node,
		Period:          a.cfg.relistPeriod,
		EventedPeriod:   a.cfg.eventedRelistPeriod,
		ContainerEvents: containerEvents(client),
		Logger:          log,
		Registerer:      reg,
	})
	if err != nil {
		return err
	}
	workers, err := podworkers.New(mgr, relister, emit, statuses, podworkers.Config{
		Node:         a.cfg.node,
		Workers:      a.cfg.workers,
		ResyncPeriod: a.cfg.resyncPeriod,
		GCPeriod:     gcPeriod,
		Prober:       probes,
		Logger:       log,
		Registerer:   reg,
	})
	if err != nil {
		return err
	}
	logCfg := a.cfg.containerLogs
	logCfg.Logger = log
	rotation, err := containerlogs.New(client, logCfg)
	if err != nil {
		return err
	}
	// Only root mounts the tmpfs of an emptyDir of medium Memory; checked once.
	noTmpfs := os.Geteuid() != 0
	if noTmpfs {
		log.Info().Msg("not running as root: pods with an emptyDir of medium Memory are rejected")
	}
	cons, err := consumer.New(js, answers, pub, workers, consumer.Config{
		Node:             a.cfg.node,
		SubjectPrefix:    a.cfg.streams.SubjectPrefix,
		Workers:          a.cfg.workers,
		AllowPrivileged:  a.cfg.allowPrivileged,
		NoMemoryEmptyDir: noTmpfs,
		Logger:           log,
		Denials:          &a.denials,
		Registerer:       reg,
	})
	if err != nil {
		return err
	}
	nodeSvc, err := nodeservice.New(client, nodeservice.Config{
		Node:          a.cfg.node,
		SubjectPrefix: a.cfg.streams.SubjectPrefix,
		Logger:        log,
		Registerer:    reg,
	})
	if err != nil {
		return err
	}
	a.attached.Store(cons)
	startedAt := time.Now().UTC()

	// The publishers and the relist outlive ctx: the drain still syncs
	// (from the cache) and publishes.
	pubCtx, stopPub := context.WithCancel(context.WithoutCancel(ctx))
	relistCtx, stopRelist := context.WithCancel(context.WithoutCancel(ctx))
	var bg, syncing sync.WaitGroup
	bg.Go(func() { pub.Run(pubCtx) })
	bg.Go(func() { statuses.Run(pubCtx) })
	bg.Go(func() { relister.Run(relistCtx) })
	// These end with the consumer, which can fail on its own (a consumer
	// NATS does not allow).
	bgCtx, stopBG := context.WithCancel(ctx)
	defer stopBG()
	syncing.Go(func() { workers.Run(bgCtx, a.cfg.shutdownTimeout) })
	bg.Go(func() {
		status.RunHeartbeat(bgCtx, js, status.HeartbeatPeriod, func() schemas.NodeRecord {
			v := client.RuntimeVersion()
			return schemas.NodeRecord{
				Node:              a.cfg.node,
				JetletVersion:     cli.Version(),
				RuntimeName:       v.GetRuntimeName(),
				RuntimeVersion:    v.GetRuntimeVersion(),
				RuntimeAPIVersion: v.GetRuntimeApiVersion(),
				RuntimeEndpoint:   client.Endpoint(),
				Isolation:         a.isolation,
				Pods:              workers.PodCounts(),
				StartedAt:         startedAt,
			}
		}, log)
	})
	bg.Go(func() { rederiveAfterDrops(bgCtx, pub, relister, a) })
	bg.Go(func() { rotation.Run(bgCtx) })
	bg.Go(func() {
		if err := nodeSvc.Run(bgCtx, js.Conn()); err != nil {
			log.Warn().Err(err).Msg("node service (logs, exec) not served")
		}
	})

	runErr := cons.Run(ctx, a.cfg.shutdownTimeout)
	stopBG()
	syncing.Wait() // the background syncs drain beside the consumer's
	probes.Stop()  // no sync starts probes any more; the last events are flushed below
	stopRelist()
	flushCtx, cancel := context.WithTimeout(context.Background(), a.cfg.shutdownTimeout)
	defer cancel()
	if err := flushAll(flushCtx, pub, statuses); err != nil {
		log.Warn().Err(err).Msg("not every event or status was published before shutdown; the next relist derives them again")
	}
	stopPub()
	bg.Wait()
	// A denied delete fails at once rather than at the flush deadline.
	removeCtx, stopWatch := a.denials.Watch(flushCtx, "$KV."+schemas.BucketNodes+"."+a.cfg.node)
	defer stopWatch()
	if err := status.RemoveHeartbeat(removeCtx, js, a.cfg.node); err != nil {
		log.Warn().Err(err).Msg("node record not removed from " + schemas.BucketNodes + "; it expires with the bucket's TTL")
	}
	return runErr
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
	t := time.NewTicker(rederiveCheck)
	defer t.Stop()
	pending := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pending = pub.TakeDropped() || pending
		if nc := a.nc.Load(); pending && nc != nil && nc.IsConnected() {
			relister.Rederive(ctx)
			pending = false
		}
	}
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
