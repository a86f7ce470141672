package client

import (
	"slices"
	"strings"
	"testing"

	"github.com/jetlet/jetlet/schemas"
)

func TestNodePermissionsNameOnlyTheNode(t *testing.T) {
	p := nodePermissions("jetlet", "n1", 1)
	for _, s := range slices.Concat(p.publish, p.subscribe) {
		if strings.Contains(s, "n2") || strings.Contains(s, "intent.*") || strings.HasSuffix(s, "JETLET_INTENTS.*") {
			t.Errorf("n1 may %s", s)
		}
	}
	for _, want := range []string{
		"jetlet.result.n1.*", "jetlet.event.n1.>", "jetlet.dead.n1", "$KV.jetlet_status.n1.>", "$KV.jetlet_nodes.n1",
		"$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n1.jetlet.intent.n1.>",
		"$JS.API.CONSUMER.MSG.NEXT.JETLET_INTENTS.jetlet-n1",
		"$JS.ACK.JETLET_INTENTS.jetlet-n1.>",
		"$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n1-replay.jetlet.intent.n1.>",
		// What it stored, read back with batched direct gets.
		"$JS.API.DIRECT.GET.JETLET_RESULTS", "$JS.API.DIRECT.GET.JETLET_EVENTS",
		"$JS.API.DIRECT.GET.KV_jetlet_status.$KV.jetlet_status.n1.>",
		// Every ConfigMap; its own Secrets (docs/contract.md section 11).
		"$JS.API.DIRECT.GET.KV_jetlet_configmaps.$KV.jetlet_configmaps.>",
		"$JS.API.DIRECT.GET.KV_jetlet_secrets.$KV.jetlet_secrets.n1.>",
		"$JS.API.CONSUMER.CREATE.KV_jetlet_secrets.*.$KV.jetlet_secrets.n1.>",
		// The images: read, never written.
		"$JS.API.DIRECT.GET.OBJ_jetlet_images", "$JS.API.DIRECT.GET.OBJ_jetlet_images.>",
	} {
		if !slices.Contains(p.publish, want) {
			t.Errorf("n1 may not publish %s", want)
		}
	}
	for _, s := range p.publish {
		if strings.HasPrefix(s, "$O.") || strings.Contains(s, "PURGE") || strings.Contains(s, "CONSUMER.CREATE.OBJ_") {
			t.Errorf("n1 may publish %s", s)
		}
	}
	if !slices.Equal(p.subscribe, []string{"_INBOX_n1.>", "jetlet.node.n1.logs", "jetlet.node.n1.exec", "jetlet.node.n1.cordon", "jetlet.node.n1.plan", "jetlet.node.n1.stats", "jetlet.node.n1.credit.*",
		"jetlet.node.n1.stream", "jetlet.node.n1.stream.*",
		"$SRV.*", "$SRV.*.jetlet", "$SRV.*.jetlet.*"}) || !p.serves {
		t.Errorf("n1 subscribes to %v", p.subscribe)
	}
}

// With sharded intents a node's consumers are on its partition's stream,
// and on no other.
func TestNodePermissionsNameItsIntentsPartition(t *testing.T) {
	const partitions = 3
	own := schemas.IntentsStream("n1", partitions)
	p := nodePermissions("jetlet", "n1", partitions)
	for _, want := range []string{
		"$JS.API.CONSUMER.CREATE." + own + ".jetlet-n1.jetlet.intent.n1.>",
		"$JS.API.CONSUMER.MSG.NEXT." + own + ".jetlet-n1",
		"$JS.ACK." + own + ".jetlet-n1.>",
	} {
		if !slices.Contains(p.publish, want) {
			t.Errorf("n1 may not publish %s", want)
		}
	}
	for _, s := range p.publish {
		if strings.Contains(s, schemas.StreamIntents) && !strings.Contains(s, own) {
			t.Errorf("n1 may publish %s, outside its partition's stream %s", s, own)
		}
	}
}

func TestNATSConfigKeepsItsKeys(t *testing.T) {
	dir := t.TempDir()
	first := runCLI(t.Context(), "", "nats-config", "--nodes", "n1", "--keys-dir", dir)
	second := runCLI(t.Context(), "", "nats-config", "--nodes", "n1,n2", "--keys-dir", dir)
	if first.code != 0 || second.code != 0 {
		t.Fatalf("exit %d, %d: %s%s", first.code, second.code, first.stderr, second.stderr)
	}
	for _, line := range strings.Split(first.stdout, "\n") {
		if strings.Contains(line, "nkey:") && !strings.Contains(second.stdout, strings.TrimSpace(line)[:60]) {
			t.Errorf("a key changed on the second run: %s", line)
		}
	}
	wantContains(t, "stdout", second.stdout, "# node-n2: node n2")
	res := runCLI(t.Context(), "", "nats-config", "--nodes", "n1,N_2", "--keys-dir", dir)
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, `"N_2" is not a DNS-1123 label`)
}
