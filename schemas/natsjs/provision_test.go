package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/natstest"
)

func defaultStreams(t *testing.T) natsjs.StreamsConfig {
	t.Helper()
	var cfg natsjs.StreamsConfig
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestProvisionCreatesContractStreamsAndBuckets(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ctx := t.Context()
	cfg := defaultStreams(t)
	if err := natsjs.Provision(ctx, js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		schemas.StreamIntents: "jetlet.intent.>",
		schemas.StreamResults: "jetlet.result.>",
		schemas.StreamEvents:  "jetlet.event.>",
		schemas.StreamDead:    "jetlet.dead.>",
	}
	for name, subject := range want {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		got := s.CachedInfo().Config
		if len(got.Subjects) != 1 || got.Subjects[0] != subject {
			t.Errorf("%s subjects = %v, want [%s]", name, got.Subjects, subject)
		}
		if got.Retention != jetstream.LimitsPolicy {
			t.Errorf("%s retention = %v, want limits", name, got.Retention)
		}
		// Sized to the fleet: unset, the server caps it at 1,000 and node
		// 1,001 could not attach.
		if got.MaxConsumers != 2*10000+1000 {
			t.Errorf("%s max consumers = %d, want 21000 (2 per node of 10,000, 1,000 readers)", name, got.MaxConsumers)
		}
	}
	intents, _ := js.Stream(ctx, schemas.StreamIntents)
	if ic := intents.CachedInfo().Config; ic.MaxMsgsPerSubject != 16 || ic.Duplicates != 2*time.Minute || ic.MaxAge != 0 {
		t.Errorf("intents: per-subject %d, duplicates %s, max age %s; want 16, 2m, none", ic.MaxMsgsPerSubject, ic.Duplicates, ic.MaxAge)
	}
	for _, name := range []string{schemas.StreamResults, schemas.StreamEvents} {
		s, _ := js.Stream(ctx, name)
		if age := s.CachedInfo().Config.MaxAge; age != 7*24*time.Hour {
			t.Errorf("%s max age = %s, want 168h", name, age)
		}
	}
	status, err := js.KeyValue(ctx, schemas.BucketStatus)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := status.Status(ctx)
	if st.History() != 1 {
		t.Errorf("status history = %d, want 1", st.History())
	}
	nodes, err := js.KeyValue(ctx, schemas.BucketNodes)
	if err != nil {
		t.Fatal(err)
	}
	ns, _ := nodes.Status(ctx)
	if ns.History() != 1 || ns.TTL() != time.Minute {
		t.Errorf("nodes history %d ttl %s, want 1 and 1m", ns.History(), ns.TTL())
	}
}

func TestProvisionIsIdempotentAndConcurrent(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	cfg := defaultStreams(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- natsjs.Provision(t.Context(), js, cfg, zerolog.Nop()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent provision: %v", err)
		}
	}
	if err := natsjs.Provision(t.Context(), js, cfg, zerolog.Nop()); err != nil {
		t.Fatalf("second provision: %v", err)
	}
}

func TestProvisionUpdatesCompatibleAndKeepsMessages(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ctx := t.Context()
	cfg := defaultStreams(t)
	if err := natsjs.Provision(ctx, js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "jetlet.intent.n1.u1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	cfg.MaxAge = 24 * time.Hour
	cfg.IntentHistory = 4
	if err := natsjs.Provision(ctx, js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	s, _ := js.Stream(ctx, schemas.StreamResults)
	if age := s.CachedInfo().Config.MaxAge; age != 24*time.Hour {
		t.Errorf("results max age = %s after update, want 24h", age)
	}
	in, _ := js.Stream(ctx, schemas.StreamIntents)
	info, _ := in.Info(ctx)
	if info.Config.MaxMsgsPerSubject != 4 || info.State.Msgs != 1 {
		t.Errorf("intents: per-subject %d msgs %d, want 4 and 1", info.Config.MaxMsgsPerSubject, info.State.Msgs)
	}
}

func TestProvisionKeepsAnIncompatibleStream(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ctx := context.Background()
	cfg := defaultStreams(t)
	memory := cfg
	memory.Storage = jetstream.MemoryStorage
	if err := natsjs.Provision(ctx, js, memory, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	// File storage cannot replace memory storage in place: the stream stays.
	if err := natsjs.Provision(ctx, js, cfg, zerolog.Nop()); err != nil {
		t.Fatalf("provision over incompatible streams: %v", err)
	}
	s, _ := js.Stream(ctx, schemas.StreamEvents)
	if got := s.CachedInfo().Config.Storage; got != jetstream.MemoryStorage {
		t.Errorf("storage = %v, want the existing memory storage", got)
	}
}

func TestStreamsConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*natsjs.StreamsConfig)
	}{
		{"too many replicas", func(c *natsjs.StreamsConfig) { c.Replicas = 7 }},
		{"history too large", func(c *natsjs.StreamsConfig) { c.IntentHistory = 65 }},
		{"negative age", func(c *natsjs.StreamsConfig) { c.MaxAge = -time.Second }},
		{"dedupe beyond age", func(c *natsjs.StreamsConfig) { c.MaxAge = time.Minute; c.DuplicateWindow = time.Hour }},
		{"node ttl tiny", func(c *natsjs.StreamsConfig) { c.NodeTTL = time.Millisecond }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := defaultStreams(t)
			tt.mutate(&cfg)
			if err := cfg.Validate(); err == nil {
				t.Error("Validate accepted it")
			}
		})
	}
}

func TestProvisionRefusesReplicasASingleServerCannotHave(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ctx := t.Context()
	cfg := defaultStreams(t)
	cfg.Replicas = 3
	// Fresh: JetStream refuses to create them.
	err := natsjs.Provision(ctx, js, cfg, zerolog.Nop())
	if !errors.Is(err, natsjs.ErrReplicasUnavailable) {
		t.Fatalf("provision R3 on a single server: %v, want ErrReplicasUnavailable", err)
	}
	// Existing with 1: the server would keep 1 without a word on update.
	cfg.Replicas = 1
	if err := natsjs.Provision(ctx, js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	cfg.Replicas = 3
	err = natsjs.Provision(ctx, js, cfg, zerolog.Nop())
	if !errors.Is(err, natsjs.ErrReplicasUnavailable) {
		t.Fatalf("scale R1 to R3 on a single server: %v, want ErrReplicasUnavailable", err)
	}
	if want := "has 1 replicas, not the 3 asked for (--replicas)"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	s, err := js.Stream(ctx, schemas.StreamIntents)
	if err != nil {
		t.Fatalf("the existing stream must stay: %v", err)
	}
	if got := s.CachedInfo().Config.Replicas; got != 1 {
		t.Errorf("replicas = %d, want the existing 1", got)
	}
}

func TestProvisionCreatesTheImagesObjectStore(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ctx := t.Context()
	cfg := defaultStreams(t)
	missing, err := natsjs.Missing(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) == 0 || missing[len(missing)-1] != "object store "+schemas.ObjectStoreImages {
		t.Errorf("missing before provisioning = %v, want it to end with the images object store", missing)
	}
	if err := natsjs.Provision(ctx, js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(ctx, schemas.ObjectStoreImages)
	if err != nil {
		t.Fatalf("object store %s: %v", schemas.ObjectStoreImages, err)
	}
	st, err := obs.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Replicas() != 1 || st.Storage() != jetstream.FileStorage || st.TTL() != 0 {
		t.Errorf("images: replicas %d, storage %v, ttl %s; want 1, file, none", st.Replicas(), st.Storage(), st.TTL())
	}
	if missing, err := natsjs.Missing(ctx, js, cfg); err != nil || len(missing) != 0 {
		t.Errorf("missing after provisioning = %v, %v", missing, err)
	}
	// A second provision leaves what it holds.
	if _, err := obs.PutString(ctx, "probe", "kept"); err != nil {
		t.Fatal(err)
	}
	if err := natsjs.Provision(ctx, js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if got, err := obs.GetString(ctx, "probe"); err != nil || got != "kept" {
		t.Errorf("after a second provision: %q, %v", got, err)
	}
}

func TestProvisionCreatesTheConfigBuckets(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	ctx := t.Context()
	cfg := defaultStreams(t)
	missing, err := natsjs.Missing(ctx, js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{schemas.BucketConfigMaps, schemas.BucketSecrets} {
		if !slices.Contains(missing, "bucket "+b) {
			t.Errorf("missing before provisioning = %v, want it to name bucket %s", missing, b)
		}
	}
	if err := natsjs.Provision(ctx, js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	// The contract's keys: a name after the namespace may hold dots.
	keys := map[string]string{
		schemas.BucketConfigMaps: "default.app.config",
		schemas.BucketSecrets:    "n1.default.db.creds",
	}
	for bucket, key := range keys {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatalf("bucket %s: %v", bucket, err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.History() != 1 || st.TTL() != 0 {
			t.Errorf("%s: history %d, ttl %s; want 1, none", bucket, st.History(), st.TTL())
		}
		if sc := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config; sc.Replicas != 1 || sc.Storage != jetstream.FileStorage {
			t.Errorf("%s: replicas %d, storage %v; want 1, file", bucket, sc.Replicas, sc.Storage)
		}
		if _, err := kv.PutString(ctx, key, "v"); err != nil {
			t.Errorf("%s: put %s: %v", bucket, key, err)
		}
	}
	if missing, err := natsjs.Missing(ctx, js, cfg); err != nil || len(missing) != 0 {
		t.Errorf("missing after provisioning = %v, %v", missing, err)
	}
}

// Node 1,001 attaches: its durable consumer is the 1,001st on
// JETLET_INTENTS, past nats-server's default cap of 1,000 per stream.
func TestNodeOneThousandAndOneAttaches(t *testing.T) {
	_, js := natstest.Connect(t, natstest.RunServer(t))
	cfg := natsjs.StreamsConfig{Storage: jetstream.MemoryStorage}
	cfg.SetDefaults()
	if err := natsjs.Provision(t.Context(), js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	for i := range 1001 {
		node := fmt.Sprintf("n%d", i)
		if _, err := js.CreateConsumer(t.Context(), schemas.StreamIntents, jetstream.ConsumerConfig{
			Durable: natsjs.DurableName(node), FilterSubject: "jetlet.intent." + node + ".>", AckPolicy: jetstream.AckExplicitPolicy,
		}); err != nil {
			t.Fatalf("node %d of 1001: %v", i+1, err)
		}
	}
}
