package consumer

import (
	"context"
	"fmt"
	"time"

	"github.com/jetlet/jetlet/reconcile/podworkers"
)

// awaitBus waits until the streams can be used (Config.BusUp). When they
// cannot within OfflineAfter and the node keeps a checkpoint, it starts the
// pods from it first (bridge), and keeps waiting: the node runs offline.
func (c *Consumer) awaitBus(ctx context.Context) error {
	if c.cfg.BusUp == nil {
		return nil
	}
	timer := time.NewTimer(c.cfg.OfflineAfter)
	defer timer.Stop()
	select {
	case <-c.cfg.BusUp:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
	}
	if c.cfg.Checkpoint != nil {
		if err := c.bridge(ctx); err != nil {
			// Waiting for the bus, as without a checkpoint: the pods keep
			// running as they are, none is restarted.
			c.log.Error().Err(err).Msg("the bus cannot be reached and the checkpoint cannot be used; waiting for the bus to start the pods")
		}
	}
	select {
	case <-c.cfg.BusUp:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// bridge starts the pods from the checkpoint while the bus is away.
func (c *Consumer) bridge(ctx context.Context) error {
	desired, err := c.cfg.Checkpoint.Load()
	if err != nil {
		return err
	}
	if err := c.sync.(OfflineSyncer).StartOffline(ctx, desired); err != nil {
		return fmt.Errorf("start the checkpoint's pods: %w", err)
	}
	now := time.Now()
	c.offlineSince.Store(&now)
	c.log.Warn().Int("pods", len(desired)).Msg("the bus cannot be reached: running the pods of the node's checkpoint until it can; intents wait in the stream")
	return nil
}

// OfflineSince reports when the node started its pods from its checkpoint,
// the bus being away; false once it recovered from the stream, or when it
// never ran offline (for /readyz).
func (c *Consumer) OfflineSince() (time.Time, bool) {
	if t := c.offlineSince.Load(); t != nil {
		return *t, true
	}
	return time.Time{}, false
}

// handOver gives the Syncer the desired state recovered from the stream:
// Start, or Resume after a start from the checkpoint; then the checkpoint
// is made to say the same.
func (c *Consumer) handOver(ctx context.Context, desired []podworkers.Desired) error {
	if c.offlineSince.Load() != nil {
		if err := c.sync.(OfflineSyncer).Resume(ctx, desired); err != nil {
			return err
		}
		c.offlineSince.Store(nil)
	} else if err := c.sync.Start(ctx, desired); err != nil {
		return err
	}
	c.recordAll(desired)
	return nil
}

// recordAll makes the checkpoint say desired. A failure is logged: the
// stream stays the truth, the checkpoint only serves a start without it.
func (c *Consumer) recordAll(desired []podworkers.Desired) {
	if c.cfg.Checkpoint == nil {
		return
	}
	if err := c.cfg.Checkpoint.Replace(desired); err != nil {
		c.log.Error().Err(err).Msg("checkpoint not written: a start without the bus would run older pods")
	}
}

// record keeps want, about to be applied, in the checkpoint.
func (c *Consumer) record(want podworkers.Desired) {
	if c.cfg.Checkpoint == nil {
		return
	}
	if err := c.cfg.Checkpoint.Record(want); err != nil {
		c.log.Error().Err(err).Str("uid", want.UID).Msg("checkpoint not written: a start without the bus would run this pod's older intent")
	}
}

// forget drops pod uid from the checkpoint: admission refused it.
func (c *Consumer) forget(uid string) {
	if c.cfg.Checkpoint == nil {
		return
	}
	if err := c.cfg.Checkpoint.Forget(uid); err != nil {
		c.log.Error().Err(err).Str("uid", uid).Msg("checkpoint not removed: a start without the bus would run a pod refused at admission")
	}
}
