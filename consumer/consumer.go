package consumer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"

	"github.com/jetlet/jetlet/internal/periodic"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

var tracer = otel.Tracer("github.com/jetlet/jetlet/consumer")

// Consumer consumes one node's intents and answers each one once.
//
// # Threading
//
// The consume callback (receive), the workers, the keep-alive and
// tombstone sweep loops (tend) and recovery share the fields marked "mu";
// each one is read and written with Consumer.mu held. A pod's decision
// state (podQueue.done) belongs to the worker that set podQueue.busy, and
// to recovery before any worker starts; busy is set and cleared under mu,
// which orders one owner after the next. Workers start only once recovery
// has finished. The outbox has its own lock.
//
// # An intent's life
//
// From the moment it is taken until it is answered or handed back, an
// intent is held: its delivery is in Consumer.held, and only the pod's
// worker, or the answerer that stores its result, settles it.
//
//	delivered by the durable consumer         recovered at start-up (above the ack
//	(not held yet)                            floor, no result in the results stream)
//	        │ result found (answered at recovery)            │
//	        ├──────────────▶ acked, no new result            │
//	        ▼                                                ▼
//	     pending ◀────────────────────────────────────────────┘
//	        │  held, in podQueue.pending in stream order
//	        │  (stays while the pod is blocked on an older intent)
//	        ▼  a worker takes the pod's batch
//	     in sync ── redelivered and its result found stored ──▶ answered
//	        │  decided: applied (Sync), Superseded, Stale or Rejected
//	        ▼  the worker goes on to its next pod
//	     in the outbox (consumer/outbox.go): its result stored in the
//	        │  background, behind its pod's earlier ones, retried until stored
//	        └── result stored ───▶ answered: acked, no longer held
//	     blocked: its pod's results could not be checked (dropAnswered), so it
//	        was NAKed with a growing delay, no longer held; the pod's newer
//	        intents stay pending
//	blocked ── redelivered, or not within blockTimeout ──▶ pending
//
// How each state is left: pending, when a worker takes the pod (or, on
// shutdown, NAKed for the next jetlet); in sync, when it is decided; in the
// outbox, when its result is stored (or, on shutdown past the grace, handed
// back); answered is final; blocked, when JetStream delivers the intent
// again or blockTimeout passes. A delivery of an intent already held only
// replaces the handle to settle it with. Whether an intent has its result
// is read from the results stream, never inferred from the order of
// sequences.
//
// A pod's queue (with what it applied, for Superseded and Stale) lives
// while it has intents or has applied one. Once its last applied intent is a delete
// it is tombstoned, and forgotten tombstoneTTL later; a newer apply brings
// it back.
type Consumer struct {
	js      jetstream.JetStream
	results ResultStore
	emit    EventEmitter
	sync    Syncer
	cfg     Config
	subj    schemas.Subjects
	log     zerolog.Logger
	m       *metrics

	mu     sync.Mutex
	queues map[string]*podQueue // mu: each pod's, by uid
	held   map[uint64]*delivery // mu: every intent taken and not yet settled, by stream sequence
	ready  []*podQueue          // mu: the queues with work for a worker, each at most once
	// readyCond is signalled when ready grows or the intake closes.
	readyCond *sync.Cond
	// intakeClosed: Run is stopping; intents delivered now are handed back
	// and the workers stop; mu.
	intakeClosed bool
	// answered holds the intents found answered at recovery that the
	// durable consumer may still deliver (above its ack floor); mu.
	answered map[uint64]bool
	// highestTaken is the highest stream sequence taken (delivered or
	// recovered): every intent of the node at or below it was delivered
	// once, so a first delivery of one (by a durable consumer made anew) is
	// checked against the results like a redelivery; mu.
	highestTaken uint64
	// intakeTrouble is signalled when the durable consumer's pulls miss
	// their heartbeats, or it is gone, or it forgot: superviseIntake looks
	// at it.
	intakeTrouble chan struct{}
	// durableForgot says why the durable consumer is taken to have lost
	// its state (nil: it is not); superviseIntake makes it anew; mu.
	durableForgot error
	// lastDeliverySeq is the durable consumer's last delivery sequence (0
	// before its first delivery, and again when it is made anew); mu.
	lastDeliverySeq uint64
	// remakeAtAttach says why recovery took the durable consumer for lost
	// (nil: it did not). Only Run's goroutine, before consuming, uses it.
	remakeAtAttach error
	// durableFound is the durable consumer's config as recovery found it
	// (nil: there was none), for attach to keep what an update cannot
	// change; Run's goroutine, like the two above.
	durableFound *jetstream.ConsumerConfig
	// durableServer is the server the durable consumer was last seen on
	// ("" when not known). Run's goroutine sets it until it starts
	// superviseIntake, which alone uses it after.
	durableServer string

	// out holds the results waiting to be stored; its answerers store them.
	out *outbox

	attached atomic.Bool
	// offlineSince is when the pods were started from the checkpoint, nil
	// once the stream's desired state is handed over (or never offline).
	offlineSince atomic.Pointer[time.Time]
}

// New returns a Consumer answering intents through results and emitting
// its events through emit; it does no I/O before Run.
func New(js jetstream.JetStream, results ResultStore, emit EventEmitter, syncer Syncer, cfg Config) (*Consumer, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, ok := syncer.(OfflineSyncer); cfg.Checkpoint != nil && !ok {
		return nil, fmt.Errorf("%w: a checkpoint needs a Syncer that can start offline", ErrInvalidConfig)
	}
	c := &Consumer{
		js:       js,
		results:  results,
		emit:     emit,
		sync:     syncer,
		cfg:      cfg,
		subj:     schemas.Subjects{Prefix: cfg.SubjectPrefix},
		log:      cfg.Logger.With().Str("component", "consumer").Logger(),
		m:        newMetrics(cfg.Registerer),
		queues:   map[string]*podQueue{},
		held:     map[uint64]*delivery{},
		answered: map[uint64]bool{},
		out:      newOutbox(cfg.MaxAckPending),

		intakeTrouble: make(chan struct{}, 1),
	}
	c.readyCond = sync.NewCond(&c.mu)
	return c, nil
}

// Attached reports whether the durable consumer is attached (for /readyz).
func (c *Consumer) Attached() bool { return c.attached.Load() }

// Run waits for the bus (starting the pods from the checkpoint meanwhile,
// see awaitBus), recovers the desired state from the stream and hands it to
// the Syncer, then starts the workers and consumes intents until ctx is done.
// On return every intent it held is settled or handed back; in-flight syncs
// get grace to finish.
func (c *Consumer) Run(ctx context.Context, grace time.Duration) error {
	if err := c.awaitBus(ctx); err != nil {
		return nil // SIGTERM before the bus was there: a clean stop
	}
	if err := c.recoverWithRetry(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // SIGTERM before recovery finished: a clean stop
		}
		return err
	}
	workers := c.startWorkers(ctx)
	defer c.stopWorkers(workers, grace)

	cc, err := c.startIntake(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	c.attached.Store(true)
	c.log.Info().Str("durable", natsjs.DurableName(c.cfg.Node)).Msg("consuming intents")
	var supervising sync.WaitGroup
	supervising.Go(func() { cc = c.superviseIntake(ctx, cc) })
	c.tend(ctx)
	supervising.Wait()
	c.attached.Store(false)
	cc.Stop()
	<-cc.Closed()
	return nil
}

// startIntake attaches the durable consumer, or makes it anew when
// recovery took it for lost, and starts consuming it.
func (c *Consumer) startIntake(ctx context.Context) (jetstream.ConsumeContext, error) {
	if c.remakeAtAttach != nil {
		return c.remakeDurable(ctx, c.remakeAtAttach, true)
	}
	return c.attach(ctx)
}

// tend keeps every intent held alive, releases the pods whose handed-back
// intent did not come back and sweeps the old tombstones, until ctx is done.
func (c *Consumer) tend(ctx context.Context) {
	var sweeping sync.WaitGroup
	sweeping.Go(func() { periodic.Every(ctx, sweepPeriod, c.sweepTombstones) })
	periodic.Every(ctx, c.cfg.AckWait/3, func() {
		c.keepAlive()
		c.unblockLost()
	})
	sweeping.Wait()
}

// workerPool is Run's workers (Config.Workers of them, each taking pod
// queues off ready), as many answerers storing their results, and the
// cancel of the context they run in.
type workerPool struct {
	running     sync.WaitGroup
	answering   sync.WaitGroup
	cancelSyncs context.CancelFunc
}

// startWorkers starts the workers and the answerers. They outlive ctx by up
// to the grace stopWorkers is given, so that SIGTERM lets them finish.
func (c *Consumer) startWorkers(ctx context.Context) *workerPool {
	syncCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &workerPool{cancelSyncs: cancel}
	for range c.cfg.Workers {
		w.running.Go(func() { c.work(syncCtx) })
		w.answering.Go(func() { c.answerer(syncCtx) })
	}
	return w
}

// stopWorkers closes the intake, gives the syncs running and the results
// waiting grace to finish (their intents kept alive meanwhile), cancels
// what is left, and hands every intent not answered back to JetStream.
func (c *Consumer) stopWorkers(w *workerPool, grace time.Duration) {
	defer w.cancelSyncs()
	c.closeIntake()
	graceCtx, cancelGrace := context.WithTimeout(context.Background(), grace)
	defer cancelGrace()
	done := make(chan struct{})
	go func() {
		w.running.Wait()
		c.out.waitEmpty(graceCtx)
		close(done)
	}()
	// Syncs still running keep their intents alive while they finish.
	keepAlive := time.NewTicker(c.cfg.AckWait / 3)
	defer keepAlive.Stop()
	expired := graceCtx.Done()
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		case <-keepAlive.C:
			c.keepAlive()
		case <-expired:
			expired = nil
			c.log.Warn().Dur("drain_ms", grace).Msg("in-flight syncs and results did not finish in time; cancelling them")
			w.cancelSyncs()
			c.out.close() // a worker waiting for room in it goes on
		}
	}
	c.out.close()
	w.cancelSyncs()
	w.answering.Wait()
	c.handBack()
}

// recoverWithRetry recovers, retrying with back-off while NATS or the
// runtime fail, until ctx is done.
func (c *Consumer) recoverWithRetry(ctx context.Context) error {
	b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxElapsedTime(0), backoff.WithMaxInterval(10*time.Second)), ctx)
	return backoff.RetryNotify(func() error { return c.recover(ctx) }, b, func(err error, next time.Duration) {
		c.log.Warn().Err(err).Dur("retry_in_ms", next).Msg("recovering the desired state failed; retrying")
	})
}

// work is one worker: it takes pod queues off ready, answers the intents
// each one has waiting and releases it, until the intake is closed.
func (c *Consumer) work(ctx context.Context) {
	for {
		p, batch, ok := c.next()
		if !ok {
			return
		}
		if len(batch) > 0 {
			c.handleIntents(ctx, p, batch)
		}
		c.release(p)
	}
}
