package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
)

// StreamsConfig sizes the streams and buckets of docs/contract.md section 2.
type StreamsConfig struct {
	// SubjectPrefix is the first token of every subject.
	SubjectPrefix string
	// Replicas of every stream and bucket (1, 3 or 5 on a cluster).
	Replicas int
	// IntentHistory is how many intents are kept per pod subject.
	IntentHistory int64
	// MaxAge bounds the age of results, events and dead letters. Intents never
	// age out: the last one per pod is the desired state.
	MaxAge time.Duration
	// DuplicateWindow is the Nats-Msg-Id dedupe window of intents, results and
	// events.
	DuplicateWindow time.Duration
	// NodeTTL removes the heartbeat of a node that stopped sending it.
	NodeTTL time.Duration
	// TerminatedStatusTTL removes the last status of a deleted pod.
	TerminatedStatusTTL time.Duration
	// Storage is file storage unless set to memory (tests, benchmarks).
	Storage jetstream.StorageType
	// MaxNodes is the fleet the streams are sized for: each stream admits
	// ConsumersPerNode consumers per node and ReaderConsumers more.
	MaxNodes int
	// IntentPartitions shards the intents into that many streams (1: one
	// JETLET_INTENTS). Above 1 the servers must map the intents' subjects
	// (IntentPartitionMapping); it is fixed for the life of the streams.
	IntentPartitions int
}

// ConsumersPerNode is what a node holds on JETLET_INTENTS: its durable and,
// at start-up, its replay consumer. It holds none on the other streams (it
// reads them back with direct gets).
const ConsumersPerNode = 2

// ReaderConsumers is the room for readers beyond the nodes' consumers: the
// client commands' and auditors' ordered consumers, a KV watch each.
const ReaderConsumers = 1000

// MaxConsumers is the consumer limit of each stream: without one,
// nats-server (2.15) caps a stream at 1,000 consumers, and node 1,001 could
// not attach.
func (c StreamsConfig) MaxConsumers() int { return ConsumersPerNode*c.MaxNodes + ReaderConsumers }

// SetDefaults fills what is unset with the contract's defaults.
func (c *StreamsConfig) SetDefaults() {
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = schemas.DefaultSubjectPrefix
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.IntentHistory == 0 {
		c.IntentHistory = 16
	}
	if c.MaxAge == 0 {
		c.MaxAge = 7 * 24 * time.Hour
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.NodeTTL == 0 {
		c.NodeTTL = time.Minute
	}
	if c.TerminatedStatusTTL == 0 {
		c.TerminatedStatusTTL = time.Hour
	}
	if c.MaxNodes == 0 {
		c.MaxNodes = DefaultMaxNodes
	}
	if c.IntentPartitions == 0 {
		c.IntentPartitions = 1
	}
}

// DefaultMaxNodes is the fleet the streams are sized for by default.
const DefaultMaxNodes = 10000

// Validate rejects settings JetStream would refuse or that break the contract.
func (c *StreamsConfig) Validate() error {
	switch {
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("replicas %d: must be 1 to 5", c.Replicas)
	case c.IntentHistory < 1 || c.IntentHistory > 64:
		return fmt.Errorf("intent history %d: must be 1 to 64", c.IntentHistory)
	case c.MaxAge < 0:
		return fmt.Errorf("max age %s: must not be negative", c.MaxAge)
	case c.DuplicateWindow <= 0:
		return fmt.Errorf("duplicate window %s: must be positive", c.DuplicateWindow)
	case c.MaxAge > 0 && c.DuplicateWindow > c.MaxAge:
		return fmt.Errorf("duplicate window %s exceeds max age %s", c.DuplicateWindow, c.MaxAge)
	case c.NodeTTL < time.Second:
		return fmt.Errorf("node TTL %s: must be at least 1s", c.NodeTTL)
	case c.TerminatedStatusTTL < time.Second:
		return fmt.Errorf("terminated status TTL %s: must be at least 1s", c.TerminatedStatusTTL)
	case c.MaxNodes < 1:
		return fmt.Errorf("max nodes %d: must be at least 1", c.MaxNodes)
	case c.IntentPartitions < 1 || c.IntentPartitions > schemas.MaxIntentPartitions:
		return fmt.Errorf("intent partitions %d: must be 1 to %d", c.IntentPartitions, schemas.MaxIntentPartitions)
	}
	return nil
}

// StreamConfigs returns the four streams as jetlet wants them. Each captures
// `<prefix>.<kind>.>` rather than the exact token count, so that a message on a
// malformed subject is still stored and can be dead-lettered instead of lost.
func (c StreamsConfig) StreamConfigs() []jetstream.StreamConfig {
	p := c.SubjectPrefix
	base := func(name, desc, subject string) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:         name,
			Description:  desc,
			Subjects:     []string{p + "." + subject + ".>"},
			Retention:    jetstream.LimitsPolicy,
			Storage:      c.Storage,
			Replicas:     c.Replicas,
			Discard:      jetstream.DiscardOld,
			Duplicates:   c.DuplicateWindow,
			AllowDirect:  true,
			MaxConsumers: c.MaxConsumers(),
		}
	}
	var streams []jetstream.StreamConfig
	if c.IntentPartitions <= 1 {
		intents := base(schemas.StreamIntents, "jetlet pod intents: desired state per pod", "intent")
		intents.MaxMsgsPerSubject = c.IntentHistory
		streams = append(streams, intents)
	} else {
		subj := schemas.Subjects{Prefix: p}
		for k := range c.IntentPartitions {
			intents := base(schemas.IntentsPartitionStream(k), fmt.Sprintf("jetlet pod intents, partition %d of %d: desired state per pod", k, c.IntentPartitions), "")
			intents.Subjects = []string{subj.IntentPartitionSubjects(k)}
			src, dest := subj.IntentPartitionTransform(k)
			intents.SubjectTransform = &jetstream.SubjectTransformConfig{Source: src, Destination: dest}
			intents.Metadata = map[string]string{schemas.MetadataIntentPartitions: strconv.Itoa(c.IntentPartitions)}
			intents.MaxMsgsPerSubject = c.IntentHistory
			streams = append(streams, intents)
		}
	}
	results := base(schemas.StreamResults, "jetlet sync results: one per intent", "result")
	results.MaxAge = c.MaxAge
	evs := base(schemas.StreamEvents, "jetlet container and sandbox lifecycle events", "event")
	evs.MaxAge = c.MaxAge
	dead := base(schemas.StreamDead, "jetlet intents no pod could be read from", "dead")
	dead.MaxAge = c.MaxAge
	return append(streams, results, evs, dead)
}

// BucketConfigs returns the KV buckets as jetlet wants them.
func (c StreamsConfig) BucketConfigs() []jetstream.KeyValueConfig {
	return []jetstream.KeyValueConfig{
		{
			Bucket:      schemas.BucketStatus,
			Description: "jetlet: latest status of every pod, key <node>.<uid>",
			History:     1,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
			// Enables per-message TTLs: the Terminated status of a deleted pod
			// expires on its own while live pods' statuses never do.
			LimitMarkerTTL: c.TerminatedStatusTTL,
		},
		{
			Bucket:      schemas.BucketNodes,
			Description: "jetlet: node heartbeats, key <node>",
			History:     1,
			TTL:         c.NodeTTL,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
		},
		// docs/contract.md section 11: the latest of each object is what a pod
		// mounts; a KV watch brings its changes.
		{
			Bucket:      schemas.BucketConfigMaps,
			Description: "jetlet: ConfigMaps, key <namespace>.<name>",
			History:     1,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
		},
		{
			Bucket:      schemas.BucketSecrets,
			Description: "jetlet: Secrets sealed for one node, key <node>.<namespace>.<name>",
			History:     1,
			Storage:     c.Storage,
			Replicas:    c.Replicas,
		},
	}
}

// ObjectStoreConfigs returns the object stores as jetlet wants them: the
// images pushed over the bus (docs/contract.md section 13), kept until replaced or
// deleted, on the storage and with the replicas of the streams.
func (c StreamsConfig) ObjectStoreConfigs() []jetstream.ObjectStoreConfig {
	return []jetstream.ObjectStoreConfig{{
		Bucket:      schemas.ObjectStoreImages,
		Description: "jetlet: images pushed with jetlet image push, served by each node's loopback registry",
		Storage:     c.Storage,
		Replicas:    c.Replicas,
	}}
}

// ObjectStoreStream is the stream that holds object store bucket.
func ObjectStoreStream(bucket string) string { return "OBJ_" + bucket }

// ErrReplicasUnavailable is wrapped by Provision's error when a stream cannot
// have the replicas asked for: a configuration error that retrying does not mend.
var ErrReplicasUnavailable = errors.New("replicas unavailable")

// jsErrReplicasNotSupported is JetStream's refusal of replicas > 1 on a
// server that is not part of a cluster.
const jsErrReplicasNotSupported jetstream.ErrorCode = 10074

// Provision creates the streams, buckets and object stores that are absent and updates the ones
// whose config differs. Several jetlet processes may run it at once against one
// NATS: creation races settle on whichever config landed first, and a config
// that cannot be updated in place (storage type, for one) is kept and logged,
// never deleted. Replicas are the exception: a stream left with other replicas
// than asked for is an error (ErrReplicasUnavailable), never kept silently.
func Provision(ctx context.Context, js jetstream.JetStream, cfg StreamsConfig, log zerolog.Logger) error {
	if err := CheckIntentPartitions(ctx, js, cfg.IntentPartitions); err != nil {
		return err
	}
	for _, sc := range cfg.StreamConfigs() {
		if err := ensureStream(ctx, js, sc, log); err != nil {
			return err
		}
	}
	for _, kc := range cfg.BucketConfigs() {
		if err := ensureBucket(ctx, js, kc, log); err != nil {
			return err
		}
	}
	for _, oc := range cfg.ObjectStoreConfigs() {
		if err := ensureObjectStore(ctx, js, oc, log); err != nil {
			return err
		}
	}
	return nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, log zerolog.Logger) error {
	// Two tries: a concurrent creator can make the first one fail with "already
	// in use" between our update (not found) and our create.
	var err error
	for range 2 {
		if _, err = js.CreateOrUpdateStream(ctx, want); err == nil || !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			break
		}
	}
	return settle(ctx, js, want.Name, want.Replicas, err, log)
}

func ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig, log zerolog.Logger) error {
	var err error
	for range 2 {
		if _, err = js.CreateOrUpdateKeyValue(ctx, want); err == nil ||
			!errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && !errors.Is(err, jetstream.ErrBucketExists) {
			break
		}
	}
	return settle(ctx, js, "KV_"+want.Bucket, want.Replicas, err, log)
}

func ensureObjectStore(ctx context.Context, js jetstream.JetStream, want jetstream.ObjectStoreConfig, log zerolog.Logger) error {
	var err error
	for range 2 {
		if _, err = js.CreateOrUpdateObjectStore(ctx, want); err == nil ||
			!errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) && !errors.Is(err, jetstream.ErrBucketExists) {
			break
		}
	}
	return settle(ctx, js, ObjectStoreStream(want.Bucket), want.Replicas, err, log)
}

// settle checks what a create-or-update left behind. No stream at all is
// fatal. A stream with other replicas than asked for is fatal too: a server
// outside a cluster silently keeps 1 on update, and a cluster that cannot
// place more refuses. Any other refused change keeps the existing stream as it
// is, with a warning naming the change.
func settle(ctx context.Context, js jetstream.JetStream, stream string, replicas int, updateErr error, log zerolog.Logger) error {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		if updateErr == nil {
			updateErr = err
		}
		var apiErr *jetstream.APIError
		if errors.As(updateErr, &apiErr) && apiErr.ErrorCode == jsErrReplicasNotSupported {
			return fmt.Errorf("provision stream %s with %d replicas: %w: %w; a NATS server outside a JetStream cluster (the embedded one included) holds 1 replica", stream, replicas, ErrReplicasUnavailable, updateErr)
		}
		return fmt.Errorf("provision stream %s: %w", stream, updateErr)
	}
	if have := s.CachedInfo().Config.Replicas; have != replicas {
		why := "NATS kept them; a server outside a JetStream cluster (the embedded one included) holds 1 replica"
		if updateErr != nil {
			why = "NATS refused: " + updateErr.Error()
		}
		return fmt.Errorf("stream %s has %d replicas, not the %d asked for (--replicas): %w: %s", stream, have, replicas, ErrReplicasUnavailable, why)
	}
	if updateErr != nil {
		log.Warn().Err(updateErr).Str("stream", stream).
			Msg("stream exists with a config that cannot be updated to jetlet's; using it as it is")
	}
	return nil
}

// Missing names the streams and buckets of cfg that NATS does not have. It
// needs only the right to look them up, which a node's permissions give
// where creating them is an operator's (docs/contract.md section 10).
func Missing(ctx context.Context, js jetstream.JetStream, cfg StreamsConfig) ([]string, error) {
	if err := CheckIntentPartitions(ctx, js, cfg.IntentPartitions); err != nil {
		return nil, err
	}
	var missing []string
	check := func(what, stream string) error {
		_, err := js.Stream(ctx, stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			missing = append(missing, what)
			return nil
		}
		return err
	}
	for _, sc := range cfg.StreamConfigs() {
		if err := check("stream "+sc.Name, sc.Name); err != nil {
			return nil, err
		}
	}
	for _, kc := range cfg.BucketConfigs() {
		if err := check("bucket "+kc.Bucket, "KV_"+kc.Bucket); err != nil {
			return nil, err
		}
	}
	for _, oc := range cfg.ObjectStoreConfigs() {
		if err := check("object store "+oc.Bucket, ObjectStoreStream(oc.Bucket)); err != nil {
			return nil, err
		}
	}
	return missing, nil
}
