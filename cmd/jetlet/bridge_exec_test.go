package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// jetlet bridge runs the jetlet-bridge installed beside jetlet before one in
// PATH, and says what to do when there is none.
func TestBridgeBinaryIsFoundBesideJetletThenInPATH(t *testing.T) {
	installed, other := t.TempDir(), t.TempDir()
	for _, dir := range []string{installed, other} {
		if err := os.WriteFile(filepath.Join(dir, bridgeProgram), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", other)
	if got, err := bridgeBinary(filepath.Join(installed, "jetlet")); err != nil || got != filepath.Join(installed, bridgeProgram) {
		t.Fatalf("beside jetlet: %q, %v", got, err)
	}
	if got, err := bridgeBinary(filepath.Join(t.TempDir(), "jetlet")); err != nil || got != filepath.Join(other, bridgeProgram) {
		t.Fatalf("in PATH: %q, %v", got, err)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := bridgeBinary(filepath.Join(t.TempDir(), "jetlet")); err == nil || !strings.Contains(err.Error(), "go build ./cmd/jetlet-bridge") {
		t.Fatalf("none: %v", err)
	}
}
