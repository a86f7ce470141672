// Package cri_test is jetlet's CRI conformance suite: one set of tests run
// through jetlet's own CRI client (package runtime) against every backend it
// is given. The embedded process runtime (runtime/embedded) is always tested,
// started in-process; an external runtime is tested too when
// JETLET_CRI_ENDPOINT names its socket (for example
// unix:///run/containerd/containerd.sock), with JETLET_CRI_IMAGE naming an
// image containers can run /bin/sh from (pulled only when ImageStatus does
// not find it).
//
// Every object the suite creates carries the label jetlet.test/run=<id> and
// is removed when the test that made it ends.
package cri_test
