package e2e_test

import (
	"os"
	"testing"

	"github.com/jetlet/jetlet/runtime/proc/shim"
)

func TestMain(m *testing.M) {
	if shim.Requested() {
		os.Exit(shim.Main())
	}
	os.Exit(m.Run())
}
