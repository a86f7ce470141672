package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/jetlet/jetlet/schemas"
)

func TestLoadOrCreateNodeKeyMakesOneAndKeepsIt(t *testing.T) {
	dir := t.TempDir()
	path := nodeKeyPath(dir)
	first, err := LoadOrCreateNodeKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("seed mode %04o, want 0600", fi.Mode().Perm())
	}
	again, err := LoadOrCreateNodeKey(path)
	if err != nil {
		t.Fatal(err)
	}
	pub1, _ := first.PublicKey()
	pub2, _ := again.PublicKey()
	if pub1 != pub2 || !nkeys.IsValidPublicCurveKey(pub1) {
		t.Errorf("keys %q then %q, want one curve key kept", pub1, pub2)
	}
	// What the first key seals, the key read back opens.
	sealed, err := first.Seal([]byte("x"), pub1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := again.Open(sealed, pub1); err != nil {
		t.Errorf("the key read back does not open what the first sealed: %v", err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*")); len(leftovers) != 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

func TestLoadOrCreateNodeKeyRefuses(t *testing.T) {
	user, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	userSeed, _ := user.Seed()
	curve, err := nkeys.CreateCurveKeys()
	if err != nil {
		t.Fatal(err)
	}
	curveSeed, _ := curve.Seed()
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{"readable by others", string(curveSeed), 0o644, "has mode 0644"},
		{"readable by the group", string(curveSeed), 0o640, "has mode 0640"},
		{"a user seed", string(userSeed), 0o600, "delete it and jetlet writes a new one"},
		{"garbage", "not a seed\n", 0o600, "delete it and jetlet writes a new one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := nodeKeyPath(t.TempDir())
			if err := os.WriteFile(path, []byte(tt.content), tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil { // past the umask
				t.Fatal(err)
			}
			_, err := LoadOrCreateNodeKey(path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
			if got, _ := os.ReadFile(path); string(got) != tt.content {
				t.Error("the refused seed was replaced")
			}
		})
	}
}

func TestNodeRecordCarriesTheNodeKey(t *testing.T) {
	cfg := runConfig{node: "n1", dataDir: t.TempDir()}
	n, err := newNode(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	var rec schemas.NodeRecord
	n.record(&rec, nil, nil, nil, time.Now(), time.Time{})
	kp, err := LoadOrCreateNodeKey(nodeKeyPath(cfg.dataDir))
	if err != nil {
		t.Fatal(err)
	}
	if pub, _ := kp.PublicKey(); rec.XKey != pub {
		t.Errorf("record's xkey %q, want the key in the data dir, %q", rec.XKey, pub)
	}
	if pub, _ := n.xkey.PublicKey(); pub != rec.XKey {
		t.Errorf("the node's key pair is %q, its record says %q", pub, rec.XKey)
	}
}
