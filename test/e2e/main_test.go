package e2e_test

import (
	"os"
	"testing"

	"github.com/jetlet/jetlet/runtime/proc"
)

func TestMain(m *testing.M) {
	if proc.ShimRequested() {
		os.Exit(proc.ShimMain())
	}
	os.Exit(m.Run())
}
