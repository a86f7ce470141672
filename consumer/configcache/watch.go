package configcache

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
)

// bucket is one of the two watches: which keys of which bucket, how a value
// becomes an object and the cache that holds it.
type bucket[T any] struct {
	name   string
	filter string
	// prefix is what precedes <namespace>.<name> in a key: "" or "<node>.".
	prefix string
	kind   kubecontainer.ObjectKind
	decode func(ref kubecontainer.ObjectRef, value []byte) (*T, error)
	// update refuses replacing an immutable object with a changed one
	// (schemas.ErrImmutable), as the API server refuses the update.
	update func(old, obj *T) error
	cache  map[kubecontainer.ObjectRef]*T // guarded by Objects.mu
}

// Run watches jetlet_configmaps and this node's keys of jetlet_secrets and
// keeps the cache, until ctx ends (nil) or a watch cannot go on: a bucket
// that is not there, or a connection closed for good. NATS's ordered
// consumers behind the watches resume on their own after a reconnect, from
// the last revision they delivered. Run runs once.
func (o *Objects) Run(ctx context.Context) error {
	if o.started.Swap(true) {
		return errors.New("objects: Run called twice")
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		return follow(gctx, o, bucket[corev1.ConfigMap]{
			name: schemas.BucketConfigMaps, filter: jetstream.AllKeys,
			kind: kubecontainer.KindConfigMap, decode: decodeConfigMap, update: schemas.CheckConfigMapUpdate, cache: o.configMaps,
		})
	})
	g.Go(func() error {
		return follow(gctx, o, bucket[corev1.Secret]{
			name: schemas.BucketSecrets, filter: o.node + ".>", prefix: o.node + ".",
			kind: kubecontainer.KindSecret, decode: o.openSecret, update: schemas.CheckSecretUpdate, cache: o.secrets,
		})
	})
	g.Go(func() error {
		o.sendChanges(gctx)
		return nil
	})
	return g.Wait()
}

func follow[T any](ctx context.Context, o *Objects, b bucket[T]) error {
	kv, err := o.js.KeyValue(ctx, b.name)
	if err != nil {
		return watchError(ctx, b.name, err)
	}
	w, err := kv.Watch(ctx, b.filter)
	if err != nil {
		return watchError(ctx, b.name, err)
	}
	defer stop(w)
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return watchError(ctx, b.name, errors.New("the watch ended (connection closed)"))
			case e == nil: // the initial values are all in
				o.synced()
			default:
				apply(o, b, e)
			}
		}
	}
}

// watchError is nil when ctx ended, which is why the watch stopped.
func watchError(ctx context.Context, bucket string, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("objects: watch bucket %s: %w", bucket, err)
}

// stop ends the watch and drains it: nats.go's callback blocks sending on
// the watch's channel, and only returning lets the subscription close it.
func stop(w jetstream.KeyWatcher) {
	if w.Stop() != nil {
		return // the subscription was closed already, and the channel with it
	}
	for range w.Updates() {
	}
}

// apply puts one entry of b's watch in the cache: a put as its object, or as
// a bad value with no object; a delete or purge removes both. A put that
// changes an immutable object is refused: the cache keeps the object and
// no pod is woken, as kubelet, which stops watching an immutable object
// once read, never sees a change (the API server refuses it).
func apply[T any](o *Objects, b bucket[T], e jetstream.KeyValueEntry) {
	ref, ok := parseKey(b.kind, b.prefix, e.Key())
	deleted := e.Operation() != jetstream.KeyValuePut
	if !ok {
		if !deleted {
			o.reportBad(b.name, e.Key(), errors.New("the key is not <namespace>.<name>"))
		}
		return
	}
	var obj *T
	var bad error
	if !deleted {
		if obj, bad = b.decode(ref, e.Value()); bad != nil {
			bad = fmt.Errorf("key %s in %s: %w", e.Key(), b.name, bad)
		}
	}
	o.mu.Lock()
	if old, ok := b.cache[ref]; ok && obj != nil {
		if err := b.update(old, obj); err != nil {
			o.mu.Unlock()
			o.reportBad(b.name, e.Key(), fmt.Errorf("key %s in %s: the update is refused: %w", e.Key(), b.name, err))
			return
		}
	}
	delete(b.cache, ref)
	delete(o.bad, ref)
	switch {
	case bad != nil:
		o.bad[ref] = bad
	case obj != nil:
		b.cache[ref] = obj
	}
	o.pending[ref] = struct{}{}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default: // a wake is pending already
	}
	if bad != nil {
		o.reportBad(b.name, e.Key(), bad)
	}
}

// reportBad logs a value that does not decode or open, or an update refused,
// and tells OnBadObject. err names the key, never the content.
func (o *Objects) reportBad(bucket, key string, err error) {
	o.cfg.Logger.Warn().Str("bucket", bucket).Str("key", key).Err(err).Msg("object ignored")
	if o.cfg.OnBadObject != nil {
		o.cfg.OnBadObject(key, err)
	}
}

// synced counts a watch whose initial values are in; the last closes ready.
func (o *Objects) synced() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.unsynced--; o.unsynced == 0 {
		close(o.ready)
	}
}

// sendChanges hands the refs changed since the last batch to Changed's
// reader, one batch at a time: what changes while it waits joins the next.
func (o *Objects) sendChanges(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		}
		o.mu.Lock()
		batch := make([]kubecontainer.ObjectRef, 0, len(o.pending))
		for ref := range o.pending {
			batch = append(batch, ref)
		}
		clear(o.pending)
		o.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		select {
		case o.changed <- batch:
		case <-ctx.Done():
			return
		}
	}
}
