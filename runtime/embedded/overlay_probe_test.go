package embedded

import (
	"os"
	"testing"
)

// The probe takes down what it mounted and leaves nothing in the dir.
func TestOverlayUsable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	ok, err := overlayUsable(dir)
	if !ok {
		t.Skipf("overlayfs cannot stack layers on %s here: %v", dir, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the probe left %v", entries)
	}
}
