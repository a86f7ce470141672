package atomicfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/jetlet/jetlet/internal/atomicfile"
)

func TestWriteReplacesAndLeavesNoTemporaryFile(t *testing.T) {
	for name, write := range map[string]func(string, []byte, os.FileMode) error{"Write": atomicfile.Write, "Replace": atomicfile.Replace} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			for _, content := range []string{"one\n", "two\n"} {
				if err := write(path, []byte(content), 0o640); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(path)
				if err != nil || string(got) != content {
					t.Fatalf("read %q, %v; want %q", got, err, content)
				}
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o640 {
				t.Errorf("mode %v, want 0640", fi.Mode().Perm())
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("directory holds %d entries, want only the file", len(entries))
			}
		})
	}
}

func TestWriteIntoMissingDirectoryFails(t *testing.T) {
	if err := atomicfile.Write(filepath.Join(t.TempDir(), "no", "f"), nil, 0o600); err == nil {
		t.Fatal("no error writing into a missing directory")
	}
}
