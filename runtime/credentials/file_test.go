package credentials

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// write replaces the file and gives it a modification time of its own, so
// that a rewrite within the file system's time granularity is still seen.
func write(t *testing.T, path, data string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestFileIsReadAgainWhenItChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.json")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	write(t, path, `{"auths": {"r.example.com": {"username": "first", "password": "s3cr3t-1"}}}`, t0)
	var logs bytes.Buffer
	f, err := Load(path, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	lookup := func() []string {
		var out []string
		for _, a := range f.Lookup("r.example.com/app") {
			out = append(out, a.Username)
		}
		return out
	}
	if got := lookup(); !slices.Equal(got, []string{"first"}) {
		t.Fatalf("after Load: %v", got)
	}

	write(t, path, `{"auths": {"r.example.com": {"username": "second", "password": "s3cr3t-2"}}}`, t0.Add(time.Second))
	if got := lookup(); !slices.Equal(got, []string{"second"}) {
		t.Fatalf("after a rewrite: %v, want second", got)
	}

	// A broken rewrite keeps the last good credentials, warned about once.
	write(t, path, `{"auths": {"r.example.com": {"auth": "s3cr3t-3"}}}`, t0.Add(2*time.Second))
	for range 3 {
		if got := lookup(); !slices.Equal(got, []string{"second"}) {
			t.Fatalf("after a broken rewrite: %v, want second kept", got)
		}
	}
	if n := strings.Count(logs.String(), "cannot be used"); n != 1 {
		t.Errorf("%d warnings about the broken file, want 1:\n%s", n, logs.String())
	}

	// Removed: no credentials.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got := lookup(); got != nil {
		t.Fatalf("after removal: %v, want none", got)
	}

	if strings.Contains(logs.String(), "s3cr3t") {
		t.Errorf("the log quotes a secret:\n%s", logs.String())
	}
}

func TestLoadRefusesAMissingOrBrokenFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "absent.json"), zerolog.Nop()); err == nil {
		t.Error("Load of a missing file: no error")
	}
	path := filepath.Join(dir, "broken.json")
	write(t, path, `{"auths": {"r.example.com": {}}}`, time.Now())
	if _, err := Load(path, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Load of a broken file: %v, want an error naming it", err)
	}
}
