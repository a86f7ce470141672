package schemas

import (
	"hash/fnv"
	"strconv"
)

// Intents may be sharded into several streams (docs/scaling.md, "Sharded
// intents"): schedulers still publish on <prefix>.intent.<node>.<uid>; an
// account subject mapping of the servers moves each intent to
// <prefix>.intent-partition.<k>.<node>.<uid>, k = partition(n, node), which
// stream JETLET_INTENTS_<k> captures and stores back under its published
// subject. With one partition, JETLET_INTENTS captures the intents itself.

// MetadataIntentPartitions is the stream metadata key that gives each
// partition stream the number of partitions, for readers to find them.
const MetadataIntentPartitions = "jetlet.dev/intent-partitions"

// MaxIntentPartitions bounds the partitions: each is a stream, a Raft group
// of its own.
const MaxIntentPartitions = 64

// IntentPartition is the partition of node's intents among n: nats-server's
// partition(n, node) of a subject mapping, FNV-1a of the node token modulo n.
func IntentPartition(node string, n int) int {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	return int(h.Sum32() % uint32(n))
}

// IntentsStream is the stream that holds node's intents among n partitions.
func IntentsStream(node string, n int) string {
	if n <= 1 {
		return StreamIntents
	}
	return IntentsPartitionStream(IntentPartition(node, n))
}

// IntentsPartitionStream is the stream of partition k.
func IntentsPartitionStream(k int) string { return StreamIntents + "_" + strconv.Itoa(k) }

// IntentsStreams are the streams that hold the intents among n partitions.
func IntentsStreams(n int) []string {
	if n <= 1 {
		return []string{StreamIntents}
	}
	out := make([]string, n)
	for k := range out {
		out[k] = IntentsPartitionStream(k)
	}
	return out
}

// IntentPartitionSubjects is what partition k's stream captures.
func (s Subjects) IntentPartitionSubjects(k int) string {
	return s.Prefix + ".intent-partition." + strconv.Itoa(k) + ".>"
}

// IntentPartitionMapping is the account subject mapping that shards the
// intents among n partitions: source and destination, as a nats-server
// configuration's `mappings` holds them.
func (s Subjects) IntentPartitionMapping(n int) (src, dest string) {
	return s.Prefix + ".intent.*.>", s.Prefix + ".intent-partition.{{partition(" + strconv.Itoa(n) + ",1)}}.{{wildcard(1)}}.>"
}

// IntentPartitionTransform is the subject transform of partition k's
// stream, which stores an intent under the subject it was published on.
func (s Subjects) IntentPartitionTransform(k int) (src, dest string) {
	return s.Prefix + ".intent-partition." + strconv.Itoa(k) + ".*.>", s.Prefix + ".intent.{{wildcard(1)}}.>"
}
