// Package configcache is the node's reader of the ConfigMaps and Secrets pods
// refer to (docs/contract.md section 11), after kubelet's watch-based configmap and
// secret managers: Objects watches jetlet_configmaps (every key) and this
// node's keys of jetlet_secrets, opens each SealedSecret with the node's
// curve key, and keeps what it read in memory for reconcile, which reads it
// through kubecontainer.ObjectSource. A value that does not decode or open
// leaves no entry; it is logged and reported by its key, never by content.
package configcache

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// Config configures Objects.
type Config struct {
	// SyncWait bounds how long ConfigMap and Secret wait for Ready before
	// answering kubecontainer.ErrObjectsNotSynced (default 1s, kubelet's
	// wait for its object caches).
	SyncWait time.Duration
	// OnBadObject, if set, is told of each value that does not decode or
	// open, and of each update of an immutable object it refuses
	// (schemas.ErrImmutable), by its key in its bucket; err names the key
	// and why, never the content. It runs on a watch's goroutine: it must
	// not block.
	OnBadObject func(key string, err error)
	Logger      zerolog.Logger
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = natsjs.ErrInvalidConfig

func (c *Config) setDefaults() {
	if c.SyncWait == 0 {
		c.SyncWait = time.Second
	}
}

func (c *Config) validate() error {
	if c.SyncWait < 0 {
		return fmt.Errorf("%w: sync wait %s is negative", ErrInvalidConfig, c.SyncWait)
	}
	return nil
}

// Objects keeps the ConfigMaps and this node's Secrets as the buckets hold
// them, from Run on. It implements kubecontainer.ObjectSource.
type Objects struct {
	js   jetstream.JetStream
	node string
	key  nkeys.KeyPair
	cfg  Config

	started atomic.Bool   // Run was called: it runs once
	ready   chan struct{} // closed by the watch that finishes its initial values last
	changed chan []kubecontainer.ObjectRef
	wake    chan struct{} // a token: pending is not empty

	mu         sync.RWMutex // guards the fields below; the watches write, readers read
	configMaps map[kubecontainer.ObjectRef]*corev1.ConfigMap
	secrets    map[kubecontainer.ObjectRef]*corev1.Secret
	bad        map[kubecontainer.ObjectRef]error // refs whose value does not decode or open
	pending    map[kubecontainer.ObjectRef]struct{}
	unsynced   int // watches that have not delivered their initial values
}

var _ kubecontainer.ObjectSource = (*Objects)(nil)

// New returns Objects for node, which opens its Secrets with key (the node's
// curve key pair); nothing is read before Run.
func New(js jetstream.JetStream, node string, key nkeys.KeyPair, cfg Config) (*Objects, error) {
	switch {
	case js == nil:
		return nil, fmt.Errorf("%w: no JetStream", ErrInvalidConfig)
	case key == nil:
		return nil, fmt.Errorf("%w: no node key", ErrInvalidConfig)
	}
	if err := natsjs.CheckNode(node); err != nil {
		return nil, err
	}
	// Only a curve key pair with its seed gets as far as the input's length:
	// other keys refuse to open anything at all.
	if _, err := key.Open(nil, ""); !errors.Is(err, nkeys.ErrInvalidEncrypted) {
		return nil, fmt.Errorf("%w: the node key is not a curve key pair with its seed (SX...)", ErrInvalidConfig)
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Objects{
		js:         js,
		node:       node,
		key:        key,
		cfg:        cfg,
		ready:      make(chan struct{}),
		changed:    make(chan []kubecontainer.ObjectRef),
		wake:       make(chan struct{}, 1),
		configMaps: map[kubecontainer.ObjectRef]*corev1.ConfigMap{},
		secrets:    map[kubecontainer.ObjectRef]*corev1.Secret{},
		bad:        map[kubecontainer.ObjectRef]error{},
		pending:    map[kubecontainer.ObjectRef]struct{}{},
		unsynced:   2,
	}, nil
}

// Ready is closed once both buckets' values as they stood when Run began
// are in the cache. Before it, ConfigMap and Secret wait for it up to
// Config.SyncWait, then answer kubecontainer.ErrObjectsNotSynced, never
// ErrObjectNotFound: an object not yet read is not missing.
func (o *Objects) Ready() <-chan struct{} { return o.ready }

// Changed gives the objects put, updated or deleted since its last batch,
// the initial values included, each once per batch. Changes coalesce while
// nobody receives, so a slow reader never holds up the watches; Run sends.
func (o *Objects) Changed() <-chan []kubecontainer.ObjectRef { return o.changed }

// ConfigMap implements kubecontainer.ObjectSource.
func (o *Objects) ConfigMap(namespace, name string) (*corev1.ConfigMap, error) {
	return lookup(o, o.configMaps, kubecontainer.ObjectRef{Kind: kubecontainer.KindConfigMap, Namespace: namespace, Name: name})
}

// Secret implements kubecontainer.ObjectSource.
func (o *Objects) Secret(namespace, name string) (*corev1.Secret, error) {
	return lookup(o, o.secrets, kubecontainer.ObjectRef{Kind: kubecontainer.KindSecret, Namespace: namespace, Name: name})
}

// lookup reads ref from m, once the cache is synced.
func lookup[T any](o *Objects, m map[kubecontainer.ObjectRef]*T, ref kubecontainer.ObjectRef) (*T, error) {
	if err := o.waitSynced(); err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	if obj, ok := m[ref]; ok {
		return obj, nil
	}
	if err, ok := o.bad[ref]; ok {
		return nil, fmt.Errorf("%s %w: %w", ref, kubecontainer.ErrObjectUnreadable, err)
	}
	return nil, fmt.Errorf("%s %w", ref, kubecontainer.ErrObjectNotFound)
}

func (o *Objects) waitSynced() error {
	select {
	case <-o.ready:
		return nil
	default:
	}
	t := time.NewTimer(o.cfg.SyncWait)
	defer t.Stop()
	select {
	case <-o.ready:
		return nil
	case <-t.C:
		return kubecontainer.ErrObjectsNotSynced
	}
}
