package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

func TestEnsureClientSeedWritesOnceAndReuses(t *testing.T) {
	dir := t.TempDir()
	first, err := EnsureClientSeed(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(ClientSeedPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("seed mode %04o, want 0600", fi.Mode().Perm())
	}
	again, err := EnsureClientSeed(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again != first || !nkeys.IsValidPublicUserKey(first) {
		t.Errorf("keys %q then %q, want one user key", first, again)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*")); len(leftovers) != 0 {
		t.Errorf("temporary files left behind: %v", leftovers)
	}
}

func TestEnsureClientSeedRefusesWhatIsNotAUserSeed(t *testing.T) {
	account, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	accountSeed, _ := account.Seed()
	tests := []struct {
		name, content, want string
	}{
		{"account seed", string(accountSeed), "not a user nkey seed"},
		{"garbage", "not a seed\n", "delete it and jetlet writes a new one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(ClientSeedPath(dir), []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := EnsureClientSeed(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}
