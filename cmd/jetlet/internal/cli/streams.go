package cli

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// RegisterStreamFlags registers the flags that size the streams and buckets,
// shared by `jetlet run` and `jetlet provision` (the subject prefix is each
// command's own flag).
func RegisterStreamFlags(fs *pflag.FlagSet, c *natsjs.StreamsConfig) {
	fs.IntVar(&c.Replicas, "replicas", 1, "replicas of the streams and buckets jetlet creates")
	fs.Int64Var(&c.IntentHistory, "intent-history", 16, "intents kept per pod in JETLET_INTENTS")
	fs.DurationVar(&c.MaxAge, "max-age", 7*24*time.Hour, "max age of results, events and dead letters")
	fs.DurationVar(&c.DuplicateWindow, "duplicate-window", 2*time.Minute, "Nats-Msg-Id dedupe window of intents, results and events")
	fs.DurationVar(&c.NodeTTL, "node-ttl", time.Minute, "how long a node's heartbeat outlives it in jetlet_nodes")
	fs.DurationVar(&c.TerminatedStatusTTL, "terminated-status-ttl", time.Hour, "how long the Terminated status of a deleted pod stays in jetlet_status")
	fs.IntVar(&c.MaxNodes, "max-nodes", natsjs.DefaultMaxNodes, "nodes the streams are sized for: each admits 2 consumers per node and 1,000 readers")
	fs.IntVar(&c.IntentPartitions, "intent-partitions", 1, "streams the intents are sharded into, JETLET_INTENTS_0 to _<n-1>, by the servers' subject mapping of partition(n, node) (nats-config writes it; the embedded server has it); 1: JETLET_INTENTS alone. Fixed for the life of the streams (docs/scaling.md)")
}

// ProvisionAPI is the prefix of the JetStream API calls that create and
// update streams (a bucket is a stream), which a node's permissions lack.
const ProvisionAPI = client.ProvisionAPI
