package client_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// Intents sharded into three streams, end to end, with every role's
// credentials from `jetlet nats-config --intent-partitions 3`: the
// scheduler publishes on the contract's subjects, the servers' mapping
// stores each node's intents in its partition, each node consumes its own
// partition, and the client commands find the pods wherever they are.
func TestShardedIntentsThroughJetletRun(t *testing.T) {
	const partitions = 3
	nodes := nodesInTwoPartitions(partitions)
	s := startPermServer(t, strings.Join(nodes, ","), "", "--intent-partitions", fmt.Sprint(partitions))
	if res := s.as(t, "operator", "provision", "--intent-partitions", fmt.Sprint(partitions)); res.code != 0 {
		t.Fatalf("provision as the operator: exit %d", res.code)
	}
	if res := s.as(t, "operator", "provision"); res.code == 0 || !strings.Contains(res.stderr, "--intent-partitions 3") {
		t.Errorf("provision of one intents stream over three partitions: exit %d, want a refusal naming --intent-partitions 3", res.code)
	}
	for _, n := range nodes {
		dataDir := t.TempDir()
		jetlettest.RemovePodsOnCleanup(t, dataDir)
		jetlettest.Start(t, "run", "--node", n, "--data-dir", dataDir, "--http-listen", "127.0.0.1:0",
			"--image-registry-listen", "127.0.0.1:"+itoa(freePort(t)), "--intent-partitions", fmt.Sprint(partitions),
			"--nats-url", s.url, "--nats-nkey", s.seed("node-"+n), "--nats-inbox-prefix", "_INBOX_"+n).WaitReady(time.Minute)
	}

	web := mustAbs(t, webYAML)
	for _, n := range nodes {
		if res := s.as(t, "scheduler", "apply", "-f", web, "--node", n, "--wait"); res.code != 0 || !strings.Contains(res.stdout, "Synced") {
			t.Fatalf("apply --wait on %s as the scheduler: exit %d", n, res.code)
		}
	}
	op := s.connect(t, "operator")
	if _, err := op.js.Stream(t.Context(), schemas.StreamIntents); err == nil {
		t.Errorf("stream %s exists beside the partitions", schemas.StreamIntents)
	}
	for _, n := range nodes {
		stream, err := op.js.Stream(t.Context(), schemas.IntentsStream(n, partitions))
		if err != nil {
			t.Fatal(err)
		}
		info, err := stream.Info(t.Context(), jetstream.WithSubjectFilter("jetlet.intent.>"))
		if err != nil {
			t.Fatal(err)
		}
		if len(info.State.Subjects) != 1 || !strings.HasPrefix(keyOf(info.State.Subjects), "jetlet.intent."+n+".") {
			t.Errorf("stream %s holds intents on %v; want %s's alone", stream.CachedInfo().Config.Name, info.State.Subjects, n)
		}
	}

	poll.Until(t, 30*time.Second, poll.Msg("web Running on both nodes in get pods -A"), func() bool {
		out := s.as(t, "scheduler", "get", "pods", "-A").stdout
		return regexp.MustCompile(`web\s+1/1\s+Running\s+\d+\s+\S+\s+`+nodes[0]).MatchString(out) &&
			regexp.MustCompile(`web\s+1/1\s+Running\s+\d+\s+\S+\s+`+nodes[1]).MatchString(out)
	})
	if res := s.as(t, "scheduler", "apply", "-f", web, "--node", nodes[1]); res.code != 0 || !strings.Contains(res.stdout, "unchanged") {
		t.Errorf("apply of web unchanged on %s: exit %d, want unchanged", nodes[1], res.code)
	}
	if res := s.as(t, "scheduler", "describe", "pod", "web", "--node", nodes[1]); res.code != 0 || !strings.Contains(res.stdout, "busybox:1.36") {
		t.Errorf("describe pod web on %s: exit %d, want its spec's image", nodes[1], res.code)
	}
	if res := s.as(t, "auditor", "get", "pods", "-A"); res.code != 0 || strings.Count(res.stdout, "web ") != 2 {
		t.Errorf("get pods -A as the auditor: exit %d, want both webs", res.code)
	}
	for _, n := range nodes {
		if res := s.as(t, "scheduler", "delete", "web", "--node", n, "--wait"); res.code != 0 {
			t.Errorf("delete web on %s: exit %d", n, res.code)
		}
	}
}

// nodesInTwoPartitions names two nodes whose intents land in different
// partitions.
func nodesInTwoPartitions(partitions int) []string {
	first := "n1"
	for i := 2; ; i++ {
		n := fmt.Sprintf("n%d", i)
		if schemas.IntentPartition(n, partitions) != schemas.IntentPartition(first, partitions) {
			return []string{first, n}
		}
	}
}

func keyOf(m map[string]uint64) string {
	for k := range m {
		return k
	}
	return ""
}
