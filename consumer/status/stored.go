package status

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/bus"
)

// Stored reads back the statuses of the node's pods that jetlet_status holds,
// by uid: what a restarted jetlet last said of each pod, as kubelet reads
// pod statuses back from the API server. It reads with batched direct gets
// of the node's own keys (no consumer, and what the node's NATS user may).
func (w *StatusWriter) Stored(ctx context.Context) (map[string]*schemas.PodStatus, error) {
	prefix := "$KV." + schemas.BucketStatus + "." + schemas.StatusKey(w.cfg.Node, "")
	stored := map[string]*schemas.PodStatus{}
	_, err := bus.ReadStored(ctx, w.js, w.cfg.Denials, "KV_"+schemas.BucketStatus, prefix+"*", time.Time{},
		func(m *jetstream.RawStreamMsg) error {
			uid := strings.TrimPrefix(m.Subject, prefix)
			if m.Header.Get(kvOperation) != "" || len(m.Data) == 0 {
				delete(stored, uid) // deleted or purged
				return nil
			}
			st := &schemas.PodStatus{}
			if err := json.Unmarshal(m.Data, st); err != nil {
				// Nothing to keep of it: the pod's next status replaces it.
				w.out.Log().Warn().Err(err).Str("uid", uid).Msg("stored status unreadable")
				delete(stored, uid)
				return nil
			}
			stored[uid] = st
			return nil
		})
	if err != nil {
		return nil, err
	}
	return stored, nil
}

// kvOperation is the header of a KV delete or purge marker.
const kvOperation = "KV-Operation"
