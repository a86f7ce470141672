package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// storedParallel bounds the statuses read back at once.
const storedParallel = 8

// Stored reads back the statuses jetlet_status holds of the node's pods
// uids, by uid (a pod without one is absent): what a restarted jetlet last
// said of each pod, as kubelet reads pod statuses back from the API server.
// It gets each key on its own: the node's NATS user may read its own keys
// only, one subject at a time.
func (w *StatusWriter) Stored(ctx context.Context, uids []string) (map[string]*schemas.PodStatus, error) {
	if len(uids) == 0 {
		return map[string]*schemas.PodStatus{}, nil
	}
	var kv jetstream.KeyValue
	err := natsjs.UnlessDenied(ctx, w.cfg.Denials, "$JS.API.STREAM.INFO.KV_"+schemas.BucketStatus, func(ctx context.Context) (err error) {
		kv, err = w.js.KeyValue(ctx, schemas.BucketStatus)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", schemas.BucketStatus, err)
	}
	statuses := make([]*schemas.PodStatus, len(uids))
	errs := make([]error, len(uids))
	slots := make(chan struct{}, storedParallel)
	var wg sync.WaitGroup
	for i, uid := range uids {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			statuses[i], errs[i] = w.storedOne(ctx, kv, uid)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	stored := map[string]*schemas.PodStatus{}
	for i, uid := range uids {
		if statuses[i] != nil {
			stored[uid] = statuses[i]
		}
	}
	return stored, nil
}

// storedOne reads the status of pod uid; nil when the bucket has none (or
// one that cannot be read: the pod's next status replaces it).
func (w *StatusWriter) storedOne(ctx context.Context, kv jetstream.KeyValue, uid string) (*schemas.PodStatus, error) {
	key := schemas.StatusKey(w.cfg.Node, uid)
	var e jetstream.KeyValueEntry
	err := natsjs.UnlessDenied(ctx, w.cfg.Denials, "$JS.API.DIRECT.GET.KV_"+schemas.BucketStatus, func(ctx context.Context) (err error) {
		e, err = kv.Get(ctx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("status of pod %s: %w", uid, err)
	}
	st := &schemas.PodStatus{}
	if err := json.Unmarshal(e.Value(), st); err != nil {
		w.out.Log().Warn().Err(err).Str("uid", uid).Msg("stored status unreadable")
		return nil, nil
	}
	return st, nil
}
