package client

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
)

// nodeConsumer is a consumer a node creates, with a fixed name so that the
// node's permissions can name it (docs/security.md).
type nodeConsumer struct {
	stream, name string
	filter       string // the filter it may be created with, or within
	acks         bool   // acked deliveries (the durable); the others ack none
}

// nodeConsumers are node's consumers: its durable and its replay consumer on
// the stream of its intents among partitions, of fixed names.
func nodeConsumers(prefix, node string, partitions int) []nodeConsumer {
	intents := schemas.Subjects{Prefix: prefix}.NodeIntents(node)
	stream := schemas.IntentsStream(node, partitions)
	return []nodeConsumer{
		{stream, natsjs.DurableName(node), intents, true},
		{stream, natsjs.ReplayName(node), intents, false},
	}
}

// ledgerReader is how a node reads back what it stored (which intents are
// answered, the event ledger): batched direct gets, no consumer. A batched
// get names its subject in the request's body, so the right is the whole
// stream's: a node may read every node's results and events, which carry no
// Secret's value (docs/security.md), and write only its own.
var ledgerReader = []string{"$JS.API.DIRECT.GET." + schemas.StreamResults, "$JS.API.DIRECT.GET." + schemas.StreamEvents}

// permissions is what one NATS user may publish and subscribe to.
type permissions struct {
	publish   []string
	subscribe []string
	// denyPublish carves exceptions out of publish.
	denyPublish []string
	// serves: the user answers requests, with any number of messages per
	// request (a log stream) for up to serviceReplyExpiry.
	serves bool
}

// serviceReplyExpiry is how long a node may answer one request: it bounds
// a `jetlet logs -f`, and how long the server keeps each request's reply
// subject in the node's allowance.
const serviceReplyExpiry = "24h"

// nodeServiceClient is what asking the nodes' services takes: logs (and
// their credit) and, with exec, running commands in any container and
// asking for a plan (whose intent holds a pod spec).
func nodeServiceClient(prefix string, exec bool) []string {
	out := []string{prefix + ".node.*." + schemas.EndpointLogs, prefix + ".node.*.credit.*"}
	if exec {
		out = append(out, prefix+".node.*."+schemas.EndpointExec, prefix+".node.*."+schemas.EndpointPlan)
	}
	return out
}

// streamReader is the JetStream API a reading client (the jetlet client
// commands, the nats CLI) uses on stream: lookups, direct gets and consumers
// of any name and filter (ordered consumers and KV watches make their names
// up), and their flow control.
func streamReader(stream string) []string {
	return []string{
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.INFO." + stream + ".*",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".*",
		"$JS.API.CONSUMER.DELETE." + stream + ".*",
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.FC." + stream + ".>",
		"$JS.FC.*.*." + stream + ".>",
	}
}

// kvWatcher is what nats.go's KV Get and Watch (an ordered push consumer)
// take on the keys of bucket within keys (a key or a filter): direct gets
// by key, the watcher's consumer created with that filter in the request's
// subject (NATS refuses a body whose filter differs), its deletion on Stop
// and its flow control. No other read: a get or consumer whose subject is in
// the request's body could name any key.
func kvWatcher(bucket, keys string) []string {
	stream, subjects := "KV_"+bucket, "$KV."+bucket+"."+keys
	return []string{
		"$JS.API.DIRECT.GET." + stream + "." + subjects,
		"$JS.API.CONSUMER.CREATE." + stream + ".*." + subjects,
		"$JS.API.CONSUMER.DELETE." + stream + ".*",
		"$JS.FC." + stream + ".>",
		"$JS.FC.*.*." + stream + ".>",
	}
}

// configWriter is what a scheduler writes ConfigMaps and sealed Secrets with
// (docs/contract.md section 11): puts and deletes of any key, and reads.
func configWriter() []string {
	var out []string
	for _, b := range []string{schemas.BucketConfigMaps, schemas.BucketSecrets} {
		out = append(out, "$KV."+b+".>")
		out = append(out, streamReader("KV_"+b)...)
	}
	return out
}

// imagesStream is the stream of the object store jetlet_images.
var imagesStream = natsjs.ObjectStoreStream(schemas.ObjectStoreImages)

// imagesReader is what a node's registry (schemas/natsjs/registry) reads the
// store with: each object's info, its last meta message, and its chunks,
// in batches of direct gets; no consumer.
var imagesReader = []string{"$JS.API.DIRECT.GET." + imagesStream, "$JS.API.DIRECT.GET." + imagesStream + ".>"}

// imagesPusher is what `jetlet image push` writes the store with: chunks
// and meta messages, and the purge of the chunks of an object it replaced
// (a purge request names its subject in its body, so the right is the whole
// stream's).
var imagesPusher = []string{"$O." + schemas.ObjectStoreImages + ".>", "$JS.API.STREAM.PURGE." + imagesStream}

// lookups are the account-wide reads: JetStream's presence and every stream's
// info (which tells its subjects and counts, never a message).
var lookups = []string{"$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.STREAM.NAMES", "$JS.API.STREAM.LIST"}

// api is the JetStream API for one of a node's consumers. It may be created
// only with a filter within its own: the filter is in the create request's
// subject, and the server refuses a body whose filter differs from it.
func (nc nodeConsumer) api() []string {
	out := []string{
		"$JS.API.CONSUMER.CREATE." + nc.stream + "." + nc.name + "." + nc.filter,
		"$JS.API.CONSUMER.INFO." + nc.stream + "." + nc.name,
		"$JS.API.CONSUMER.MSG.NEXT." + nc.stream + "." + nc.name,
		"$JS.API.CONSUMER.DELETE." + nc.stream + "." + nc.name,
	}
	if nc.acks {
		out = append(out, nc.ackSubjects()...)
	}
	return out
}

// ackSubjects are the v1 ack subject and the v2 one, with domain and account
// hash.
func (nc nodeConsumer) ackSubjects() []string {
	return []string{"$JS.ACK." + nc.stream + "." + nc.name + ".>", "$JS.ACK.*.*." + nc.stream + "." + nc.name + ".>"}
}

// othersAPI is what no one but the node may do with it: create it (with any
// filter), fetch from it, delete it, ack its deliveries.
func (nc nodeConsumer) othersAPI() []string {
	return append([]string{
		"$JS.API.CONSUMER.CREATE." + nc.stream + "." + nc.name,
		"$JS.API.CONSUMER.CREATE." + nc.stream + "." + nc.name + ".>",
		"$JS.API.CONSUMER.MSG.NEXT." + nc.stream + "." + nc.name,
		"$JS.API.CONSUMER.DELETE." + nc.stream + "." + nc.name,
	}, nc.ackSubjects()...)
}

// schedulerPermissions: publish intents for any node, push images, put and
// delete ConfigMaps and sealed Secrets, read logs and exec in any node's
// containers; read everything, but
// not through the nodes' own consumers, which it may neither read from nor
// change nor delete.
func schedulerPermissions(prefix string, nodes []string, partitions int) permissions {
	pub := append([]string{prefix + ".intent.*.*"}, lookups...)
	if partitions > 1 {
		// NATS checks a publish against the subject the account's mapping
		// made of it.
		pub = append(pub, prefix+".intent-partition.*.*.*")
	}
	pub = append(pub, nodeServiceClient(prefix, true)...)
	streams := append(schemas.IntentsStreams(partitions), schemas.StreamResults, schemas.StreamEvents, "KV_"+schemas.BucketStatus, "KV_"+schemas.BucketNodes, imagesStream)
	for _, s := range streams {
		pub = append(pub, streamReader(s)...)
	}
	pub = append(pub, imagesPusher...)
	pub = append(pub, configWriter()...)
	return permissions{publish: pub, subscribe: []string{"_INBOX.>"}, denyPublish: nodesConsumersAPI(prefix, nodes, partitions)}
}

// auditorPermissions: read events, results, statuses, node records and
// container logs, not through the nodes' own consumers, and neither
// ConfigMaps nor Secrets; publish nothing but read requests.
func auditorPermissions(prefix string, nodes []string, partitions int) permissions {
	pub := append(nodeServiceClient(prefix, false), lookups...)
	for _, s := range []string{schemas.StreamResults, schemas.StreamEvents, "KV_" + schemas.BucketStatus, "KV_" + schemas.BucketNodes} {
		pub = append(pub, streamReader(s)...)
	}
	return permissions{publish: pub, subscribe: []string{cli.InboxPrefix("auditor") + ".>"}, denyPublish: nodesConsumersAPI(prefix, nodes, partitions)}
}

// nodesConsumersAPI is the API of every node's consumers, for the readers'
// deny lists.
func nodesConsumersAPI(prefix string, nodes []string, partitions int) []string {
	var out []string
	for _, n := range nodes {
		for _, nc := range nodeConsumers(prefix, n, partitions) {
			out = append(out, nc.othersAPI()...)
		}
	}
	return out
}

// nodePermissions: consume its own intents through its own consumers; store
// its own results, events, dead letters, statuses and heartbeat; read back
// its own results, events and statuses; read the images of jetlet_images
// (never write them), every ConfigMap and the Secrets sealed for it, keys
// <node>.> of jetlet_secrets (never another node's ciphertext); serve its own
// logs, exec and streams.
func nodePermissions(prefix, node string, partitions int) permissions {
	subj := schemas.Subjects{Prefix: prefix}
	pub := []string{
		prefix + ".result." + node + ".*",
		prefix + ".event." + node + ".>",
		subj.Dead(node),
		"$KV." + schemas.BucketStatus + "." + node + ".>",
		"$KV." + schemas.BucketNodes + "." + node,
		// Whether the streams and buckets exist, and their handles.
		"$JS.API.STREAM.INFO.*",
		// Its own status keys.
		"$JS.API.DIRECT.GET.KV_" + schemas.BucketStatus + ".$KV." + schemas.BucketStatus + "." + node + ".>",
	}
	pub = append(pub, imagesReader...)
	pub = append(pub, ledgerReader...)
	pub = append(pub, kvWatcher(schemas.BucketConfigMaps, ">")...)
	pub = append(pub, kvWatcher(schemas.BucketSecrets, node+".>")...)
	for _, nc := range nodeConsumers(prefix, node, partitions) {
		pub = append(pub, nc.api()...)
	}
	sub := []string{
		cli.InboxPrefix(node) + ".>",
		// Its own service's endpoints and log credit.
		subj.NodeService(node, schemas.EndpointLogs),
		subj.NodeService(node, schemas.EndpointExec),
		subj.NodeService(node, schemas.EndpointCordon),
		subj.NodeService(node, schemas.EndpointPlan),
		subj.NodeService(node, schemas.EndpointStats),
		subj.LogCredit(node, "*"),
		// Its streams: their opening and the frames clients send.
		subj.NodeService(node, schemas.EndpointStream),
		subj.StreamIn(node, "*"),
		// The service framework's discovery: $SRV.PING, $SRV.INFO.jetlet,
		// $SRV.STATS.jetlet.<id>.
		"$SRV.*", "$SRV.*." + schemas.NodeServiceName, "$SRV.*." + schemas.NodeServiceName + ".*",
	}
	return permissions{publish: pub, subscribe: sub, serves: true}
}

// natsUser is one user of the generated config.
type natsUser struct {
	name  string // also its seed file's name
	role  string
	perms *permissions // nil: everything
}

func natsUsers(prefix string, nodes []string, partitions int) []natsUser {
	sched, audit := schedulerPermissions(prefix, nodes, partitions), auditorPermissions(prefix, nodes, partitions)
	users := []natsUser{
		{name: "operator", role: "operator: provisions streams and buckets, removes nodes (all rights)"},
		{name: "scheduler", role: "scheduler: publishes intents for any node, pushes images, puts ConfigMaps and sealed Secrets, reads everything", perms: &sched},
		{name: "auditor", role: "auditor: reads events, results, statuses and node records (--nats-inbox-prefix " + cli.InboxPrefix("auditor") + ")", perms: &audit},
	}
	for _, n := range nodes {
		p := nodePermissions(prefix, n, partitions)
		users = append(users, natsUser{name: "node-" + n, role: "node " + n + ": `jetlet run --node " + n + "`", perms: &p})
	}
	return users
}

type natsConfigOptions struct {
	nodes            []string
	keysDir          string
	subjectPrefix    string
	intentPartitions int
}

func newNATSConfigCommand() *cobra.Command {
	var o natsConfigOptions
	cmd := &cobra.Command{
		Use:   "nats-config --nodes N1,N2,...",
		Short: "Print the nats-server authorization block of jetlet's roles (operator, scheduler, auditor, one user per node)",
		Long: `Print a nats-server authorization block with one nkey user per role:
operator (all rights: jetlet provision, jetlet node remove), scheduler,
auditor, and node-<name> for each of --nodes, with the permissions of
docs/security.md.

Each user's seed is written to --keys-dir/<user>.nk (mode 0600); a seed that
is already there is kept, so running it again with more nodes keeps every
key. Hand each its seed: jetlet run --nats-nkey DIR/node-n1.nk, jetlet apply
--nats-nkey DIR/scheduler.nk. Include the output in the server's config
(include "jetlet-auth.conf") beside jetstream { ... }. With
--intent-partitions above 1 it also holds the subject mapping that shards
the intents into their partition streams (docs/scaling.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd.OutOrStdout()) },
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&o.nodes, "nodes", nil, "node names, comma-separated")
	fs.StringVar(&o.keysDir, "keys-dir", "./jetlet-nats-keys", "directory of the users' nkey seeds (created; existing seeds are kept)")
	fs.StringVar(&o.subjectPrefix, "subject-prefix", schemas.DefaultSubjectPrefix, "first token of every jetlet subject")
	fs.IntVar(&o.intentPartitions, "intent-partitions", 1, "streams the intents are sharded into, as `jetlet run --intent-partitions` provisions them: above 1, the output maps the intents' subjects to their partitions")
	cli.AnnotateEnv(fs)
	return cmd
}

func (o *natsConfigOptions) run(w io.Writer) error {
	if len(o.nodes) == 0 {
		return errors.New("--nodes is required: the node names, comma-separated")
	}
	for _, n := range o.nodes {
		if !schemas.ValidNodeName(n) {
			return fmt.Errorf("--nodes: %q is not a DNS-1123 label", n)
		}
	}
	if strings.ContainsAny(o.subjectPrefix, ".*> \t") || o.subjectPrefix == "" {
		return fmt.Errorf("--subject-prefix %q: must be one subject token", o.subjectPrefix)
	}
	if o.intentPartitions < 1 || o.intentPartitions > schemas.MaxIntentPartitions {
		return fmt.Errorf("--intent-partitions %d: must be 1 to %d", o.intentPartitions, schemas.MaxIntentPartitions)
	}
	if err := os.MkdirAll(o.keysDir, 0o700); err != nil {
		return fmt.Errorf("--keys-dir: %w", err)
	}
	users := natsUsers(o.subjectPrefix, o.nodes, o.intentPartitions)
	keys := make([]string, len(users))
	for i, u := range users {
		pub, err := cli.EnsureUserSeed(filepath.Join(o.keysDir, u.name+".nk"))
		if err != nil {
			return err
		}
		keys[i] = pub
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# jetlet roles for nodes %s (jetlet nats-config); seeds in %s/<user>.nk\n", strings.Join(o.nodes, ", "), o.keysDir)
	if n := o.intentPartitions; n > 1 {
		src, dest := schemas.Subjects{Prefix: o.subjectPrefix}.IntentPartitionMapping(n)
		fmt.Fprintf(&b, "# intents sharded into %d partition streams: every server maps them alike\nmappings {\n  %q: %q\n}\n", n, src, dest)
	}
	writeAuthorization(&b, users, keys)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeAuthorization(b *strings.Builder, users []natsUser, keys []string) {
	b.WriteString("authorization {\n  users = [\n")
	for i, u := range users {
		fmt.Fprintf(b, "    # %s: %s\n    { nkey: %q", u.name, u.role, keys[i])
		if u.perms != nil {
			b.WriteString(", permissions: {\n")
			writeList(b, "publish", u.perms.publish, u.perms.denyPublish)
			writeList(b, "subscribe", u.perms.subscribe, nil)
			if u.perms.serves {
				fmt.Fprintf(b, "      allow_responses: { max: -1, expires: %q }\n", serviceReplyExpiry)
			}
			b.WriteString("    }")
		}
		b.WriteString(" }\n")
	}
	b.WriteString("  ]\n}\n")
}

func writeList(b *strings.Builder, what string, allow, deny []string) {
	fmt.Fprintf(b, "      %s: {\n", what)
	for _, l := range []struct {
		key      string
		subjects []string
	}{{"allow", allow}, {"deny", deny}} {
		if len(l.subjects) == 0 {
			continue
		}
		fmt.Fprintf(b, "        %s: [\n", l.key)
		for _, s := range l.subjects {
			fmt.Fprintf(b, "          %q\n", s)
		}
		b.WriteString("        ]\n")
	}
	b.WriteString("      }\n")
}
