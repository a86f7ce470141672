package client_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/jetlet/jetlet/schemas"
)

// TestConfigCommandsWithTheSchedulersPermissions runs the ConfigMap and
// Secret commands with the scheduler's credentials of `jetlet nats-config`
// (docs/contract.md section 10 and 11): they store, list and delete; with the
// auditor's they are refused, saying so.
func TestConfigCommandsWithTheSchedulersPermissions(t *testing.T) {
	t.Parallel()
	s := startPermServer(t, "n1", "")
	if res := s.as(t, "operator", "provision"); res.code != 0 {
		t.Fatalf("provision as the operator: exit %d: %s", res.code, res.stderr)
	}
	// n1's record, with its xkey, put as n1 puts it.
	kp, err := nkeys.CreateCurveKeys()
	if err != nil {
		t.Fatal(err)
	}
	xkey, _ := kp.PublicKey()
	n1 := s.connect(t, "node-n1", nats.CustomInboxPrefix("_INBOX_n1"))
	nodes, err := n1.js.KeyValue(t.Context(), schemas.BucketNodes)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(schemas.NodeRecord{APIVersion: schemas.APIVersion, Kind: schemas.KindNode, Node: "n1", XKey: xkey})
	if _, err := nodes.Put(t.Context(), "n1", rec); err != nil {
		t.Fatal(err)
	}

	manifest := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(manifest, []byte("kind: Secret\napiVersion: v1\nmetadata: {name: db}\nstringData: {p: v}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"create", "configmap", "app", "--from-literal", "a=1"},
		{"create", "secret", "generic", "db", "--from-literal", "p=x", "--node", "n1"},
		{"get", "configmaps"},
		{"get", "secrets"},
		{"get", "secrets", "-o", "json"},
		{"apply", "-f", manifest, "--node", "n1"},
		{"delete", "secret", "default/db"},
		{"delete", "configmap", "default/app"},
	} {
		if res := s.as(t, "scheduler", args...); res.code != 0 {
			t.Errorf("jetlet %s as the scheduler: exit %d: %s", strings.Join(args, " "), res.code, res.stderr)
		}
	}
	for _, args := range [][]string{{"get", "secrets"}, {"get", "configmaps"}} {
		res := s.as(t, "auditor", args...)
		if res.code == 0 || !strings.Contains(res.stderr, "denied") {
			t.Errorf("jetlet %s as the auditor: exit %d, stderr %q; want a denial", strings.Join(args, " "), res.code, res.stderr)
		}
	}
}
