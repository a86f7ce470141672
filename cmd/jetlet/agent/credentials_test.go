package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/reconcile"
)

func TestImageCredentialsFlagAndDefault(t *testing.T) {
	const cfg = `{"auths": {"r.example.com": {"username": "u", "password": "p"}}}`
	dataDir := t.TempDir()
	other := filepath.Join(t.TempDir(), "creds.json")
	if err := os.WriteFile(other, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	found := func(t *testing.T, c reconcile.Credentials) bool {
		t.Helper()
		return len(c.Lookup("r.example.com/app")) == 1
	}

	// No flag, no <data-dir>/config.json: no credentials, no error.
	c, err := loadImageCredentials("", dataDir, zerolog.Nop())
	if err != nil || found(t, c) {
		t.Fatalf("without a file: %v, %v; want no credentials", c, err)
	}
	// The flag names a file.
	if c, err = loadImageCredentials(other, dataDir, zerolog.Nop()); err != nil || !found(t, c) {
		t.Fatalf("--image-credentials %s: %v, %v", other, c, err)
	}
	// The flag names a file that is not there: refused.
	if _, err = loadImageCredentials(filepath.Join(dataDir, "nope.json"), dataDir, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "--image-credentials") {
		t.Fatalf("a missing --image-credentials file: %v, want an error naming the flag", err)
	}
	// The default file in the data dir.
	if err := os.WriteFile(filepath.Join(dataDir, defaultCredentialsFile), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = loadImageCredentials("", dataDir, zerolog.Nop()); err != nil || !found(t, c) {
		t.Fatalf("<data-dir>/config.json: %v, %v", c, err)
	}
	// A broken default file is refused too, not ignored.
	if err := os.WriteFile(filepath.Join(dataDir, defaultCredentialsFile), []byte(`{"auths": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = loadImageCredentials("", dataDir, zerolog.Nop()); err == nil {
		t.Fatal("a broken <data-dir>/config.json: no error")
	}
}

func TestImageCredentialsFlagFromEnvironment(t *testing.T) {
	t.Setenv("JETLET_IMAGE_CREDENTIALS", "/etc/jetlet/config.json")
	cmd := NewRunCommand()
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if err := cli.BindEnv(cmd); err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("image-credentials").Value.String(); got != "/etc/jetlet/config.json" {
		t.Errorf("--image-credentials from JETLET_IMAGE_CREDENTIALS = %q", got)
	}
	if err := cmd.ParseFlags([]string{"--image-credentials", "/other.json"}); err != nil {
		t.Fatal(err)
	}
	if err := cli.BindEnv(cmd); err != nil {
		t.Fatal(err)
	}
	if got := cmd.Flags().Lookup("image-credentials").Value.String(); got != "/other.json" {
		t.Errorf("the command line lost to the environment: %q", got)
	}
}
