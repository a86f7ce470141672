// Package cri_test is jetlet's CRI conformance suite: one set of tests run
// through jetlet's own CRI client (package runtime) against every backend it
// is given. The embedded process runtime (runtime/proc) is always tested,
// started in-process; an external runtime is tested too when
// JETLET_CRI_ENDPOINT names its socket (for example
// unix:///run/containerd/containerd.sock), with JETLET_CRI_IMAGE naming an
// image containers can run /bin/sh from (pulled only when ImageStatus does
// not find it).
//
// Every object the suite creates carries the label jetlet.test/run=<id> and
// is removed when the test that made it ends.
package cri_test

import (
	"os"
	"testing"

	"github.com/jetlet/jetlet/runtime/proc/shim"
)

func TestMain(m *testing.M) {
	// The embedded runtime re-executes this test binary as each container's
	// shim.
	if shim.Requested() {
		os.Exit(shim.Main())
	}
	os.Exit(m.Run())
}
