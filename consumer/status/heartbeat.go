package status

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
)

// HeartbeatPeriod is how often a node refreshes its jetlet_nodes record.
const HeartbeatPeriod = 10 * time.Second

// ChangeGap is the least time between two records written for changes
// (RunHeartbeat's changed): a burst of admissions is one write.
const ChangeGap = time.Second

// RunHeartbeat writes the record that snapshot returns to jetlet_nodes under
// the node's key at once and then every period, until ctx is done, and also
// soon after each signal on changed (at most once per ChangeGap; nil: none),
// so that a scheduler sees what the node holds and its conditions without
// waiting for the next beat. A failed write is logged and tried again at the
// next beat. A node that stops cleanly removes its record with
// RemoveHeartbeat; the bucket's TTL removes the record of a node that died.
func RunHeartbeat(ctx context.Context, js jetstream.JetStream, period time.Duration, snapshot func() schemas.NodeRecord, changed <-chan struct{}, log zerolog.Logger) {
	log = log.With().Str("component", "heartbeat").Logger()
	var kv jetstream.KeyValue
	beat := func() {
		rec := snapshot()
		rec.APIVersion, rec.Kind = schemas.APIVersion, schemas.KindNode
		rec.HeartbeatAt = time.Now().UTC()
		data, err := json.Marshal(rec)
		if err != nil {
			log.Error().Err(err).Msg("encode node record")
			return
		}
		if kv == nil {
			if kv, err = js.KeyValue(ctx, schemas.BucketNodes); err != nil {
				log.Warn().Err(err).Msg("heartbeat: bucket not reachable")
				return
			}
		}
		if _, err := kv.Put(ctx, rec.Node, data); err != nil && ctx.Err() == nil {
			log.Warn().Err(err).Msg("heartbeat not stored; trying again next beat")
		}
	}
	beat()
	tick := time.NewTicker(period)
	defer tick.Stop()
	var gap <-chan time.Time // while set, a change waits for it
	pending := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			beat()
		case <-changed:
			if gap == nil {
				beat()
				gap = time.After(ChangeGap)
			} else {
				pending = true
			}
		case <-gap:
			gap = nil
			if pending {
				pending = false
				beat()
				gap = time.After(ChangeGap)
			}
		}
	}
}

// RemoveHeartbeat deletes node's record from jetlet_nodes, so that a node that
// stopped cleanly shows as stopped at once rather than after the bucket's TTL.
func RemoveHeartbeat(ctx context.Context, js jetstream.JetStream, node string) error {
	kv, err := js.KeyValue(ctx, schemas.BucketNodes)
	if err != nil {
		return err
	}
	return kv.Delete(ctx, node)
}
