package embedded

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestPrivateFiles(t *testing.T) {
	etc := t.TempDir()
	for path, mode := range map[string]os.FileMode{
		"shadow": 0o640, "passwd": 0o644, "ssh/ssh_host_ed25519_key": 0o600, "ssh/ssh_config": 0o644,
		"ssl/private/key.pem": 0o600, "jetlet/keys/node.nk": 0o600,
	} {
		p := filepath.Join(etc, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(etc, "ssl/private"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("shadow", filepath.Join(etc, "link")); err != nil {
		t.Fatal(err)
	}
	got := privateFiles(etc)
	want := []string{"jetlet/keys/node.nk", "shadow", "ssh/ssh_host_ed25519_key", "ssl/private"}
	for i, w := range want {
		want[i] = filepath.Join(etc, w)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("private files %q, want %q", got, want)
	}
}

func TestHiddenHostPaths(t *testing.T) {
	got := hiddenHostPaths(Config{Dir: "/data/runtime", ImageDir: "/images", ShimPath: "/usr/local/bin/jetlet-shim", HiddenPaths: []string{"/data", "/home"}}, t.TempDir())
	for _, want := range []string{"/data", "/data/runtime", "/images", "/usr/local/bin/jetlet-shim", "/home", "/root", "/run", "/var/lib"} {
		if !slices.Contains(got, want) {
			t.Errorf("hidden paths %q lack %s", got, want)
		}
	}
	if n := len(got); n != len(slices.Compact(slices.Clone(got))) {
		t.Errorf("hidden paths %q repeat one", got)
	}
}
