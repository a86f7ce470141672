// Package consumer is the JetStream half of jetlet's pod workers: a durable
// pull consumer per node, per-UID ordering and coalescing in the manner of
// kubelet's pod workers (one intent at a time per pod, newest wins, stale
// revisions refused), exactly one stored result per intent, dead letters and
// recovery of the desired state. The pods themselves are synced by a Syncer
// (reconcile/podworkers).
package consumer

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// Config configures a Consumer.
type Config struct {
	// Node is the node this process serves; its intents are
	// <prefix>.intent.<node>.<uid>.
	Node          string
	SubjectPrefix string
	// IntentsStream is the stream that holds the node's intents:
	// JETLET_INTENTS, or its partition's (schemas.IntentsStream).
	IntentsStream string
	// Workers bounds the pods synced at once (default 16).
	Workers int
	// AckWait is how long JetStream waits for an ack before redelivering;
	// held intents are kept alive with in-progress acks (default 10s). It is
	// what a delivery lost with a dying consumer leader costs: JetStream
	// counts it delivered and sends it again only then.
	AckWait time.Duration
	// MaxAckPending bounds the intents held at once: being synced or waiting
	// behind their pod's sync (default 64 per worker, at least 1024).
	MaxAckPending int
	// NoMemoryEmptyDir rejects emptyDir medium Memory (the node cannot mount
	// a tmpfs).
	NoMemoryEmptyDir bool
	// NoUserNamespaces rejects hostUsers false (the runtime does not
	// support user namespaces).
	NoUserNamespaces bool
	// DurableReplicas is the durable consumer's replicas: 0 inherits the
	// stream's (each replicated consumer is a Raft group of its own).
	DurableReplicas int
	// DurableInMemory keeps the durable consumer's state in memory on one
	// server (DurableReplicas 1), which JetStream neither moves when the
	// server is lost nor keeps when it restarts: the node makes it anew
	// then (docs/scaling.md measures both kinds).
	DurableInMemory bool
	// MaxIntentBytes bounds an intent's body (default 1 MiB).
	MaxIntentBytes int
	Logger         zerolog.Logger
	// Denials ends at once the JetStream calls whose publish NATS refuses
	// (the durable's unfiltered create, under a node's permissions); nil
	// leaves them to their timeout.
	Denials *natsjs.Denials
	// Registerer receives the consumer's metrics; nil registers nothing.
	Registerer prometheus.Registerer

	// Checkpoint keeps each pod's applied intent on the node, for a start
	// while the bus is away; nil keeps none (and never starts offline).
	Checkpoint Checkpoint
	// BusUp is closed once the streams can be used (provisioned); nil: at
	// once. Run recovers only after it; when it is not closed within
	// OfflineAfter, Run starts the pods from Checkpoint meanwhile.
	BusUp <-chan struct{}
	// OfflineAfter is how long Run waits for BusUp before it starts
	// offline (default 5s).
	OfflineAfter time.Duration
}

func (c *Config) setDefaults() {
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = schemas.DefaultSubjectPrefix
	}
	if c.IntentsStream == "" {
		c.IntentsStream = schemas.StreamIntents
	}
	if c.Workers == 0 {
		c.Workers = 16
	}
	if c.AckWait == 0 {
		c.AckWait = 10 * time.Second
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = max(1024, 64*c.Workers)
	}
	if c.MaxIntentBytes == 0 {
		c.MaxIntentBytes = schemas.DefaultMaxIntentBytes
	}
	if c.OfflineAfter == 0 {
		c.OfflineAfter = 5 * time.Second
	}
}

// ErrInvalidConfig wraps every configuration error.
var ErrInvalidConfig = errors.New("invalid consumer config")

// Validate reports the first setting that cannot work.
func (c *Config) Validate() error {
	switch {
	case !schemas.ValidNodeName(c.Node):
		return fmt.Errorf("%w: node %q is not a DNS-1123 label", ErrInvalidConfig, c.Node)
	case c.Workers < 1:
		return fmt.Errorf("%w: workers %d < 1", ErrInvalidConfig, c.Workers)
	case c.AckWait < time.Second:
		return fmt.Errorf("%w: ack wait %s < 1s", ErrInvalidConfig, c.AckWait)
	case c.DurableReplicas < 0 || c.DurableReplicas > 5:
		return fmt.Errorf("%w: durable replicas %d: must be 0 (the stream's) to 5", ErrInvalidConfig, c.DurableReplicas)
	case c.DurableInMemory && c.DurableReplicas != 1:
		return fmt.Errorf("%w: a durable kept in memory has 1 replica, not %d", ErrInvalidConfig, c.DurableReplicas)
	case c.MaxAckPending < c.Workers:
		return fmt.Errorf("%w: max ack pending %d < workers %d", ErrInvalidConfig, c.MaxAckPending, c.Workers)
	}
	return nil
}
