package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClaimDataDir(t *testing.T) {
	dir := t.TempDir()
	if from, err := claimDataDir(dir, "n1", false); err != nil || from != "" {
		t.Fatalf("first claim: %q, %v", from, err)
	}
	if _, err := claimDataDir(dir, "n1", false); err != nil {
		t.Errorf("claim by the same node: %v", err)
	}
	if _, err := claimDataDir(dir, "n2", false); err == nil || !strings.Contains(err.Error(), `belongs to node "n1", not "n2"`) {
		t.Errorf("claim by another node: %v", err)
	}
	wantNodeFile(t, dir, "n1")
	if from, err := claimDataDir(dir, "n2", true); err != nil || from != "n1" {
		t.Errorf("rename: %q, %v; want from n1", from, err)
	}
	wantNodeFile(t, dir, "n2")
	if err := os.WriteFile(filepath.Join(dir, nodeFile), []byte("Not A Node\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := claimDataDir(dir, "n2", true); err == nil || !strings.Contains(err.Error(), "not a node name") {
		t.Errorf("claim of a data dir whose node file is damaged: %v", err)
	}
}

// wantNodeFile checks the file in which the data dir records its node.
func wantNodeFile(t *testing.T, dataDir, node string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, nodeFile))
	if err != nil || string(b) != node+"\n" {
		t.Errorf("data dir's node file holds %q, %v; want %q", b, err, node+"\n")
	}
}
