package e2e_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/runtime/embedded"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/testimages"
)

// startRuntime serves the embedded process runtime from the test process on
// sock, over dir; the returned function stops serving (containers live on).
func startRuntime(t *testing.T, dir, sock string) func() {
	t.Helper()
	bridge, cidr := jetlettest.PodNetwork(t, dir)
	rt, err := embedded.New(embedded.Config{Dir: dir, ShimPath: gobuild.Shim.Path(t), Logger: zerolog.Nop(), ImageMirror: testimages.ServeLibrary(t),
		PodBridge: bridge, PodCIDR: cidr})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(context.Background(), sock); err != nil {
		t.Fatal(err)
	}
	return rt.Stop
}

func TestRuntimeDownAnswersFailedThenConverges(t *testing.T) {
	t.Parallel()
	dir := shortDir(t)
	rtDir, sock := filepath.Join(dir, "rt"), filepath.Join(dir, "rt.sock")
	stop := startRuntime(t, rtDir, sock)
	t.Cleanup(func() { // the pod's processes belong to this runtime
		stop := startRuntime(t, rtDir, sock)
		defer stop()
		jetlettest.RemoveAllPods(t, "unix://"+sock)
	})
	// The embedded runtime makes its own pod cgroups: none of kubelet's on
	// this host's /kubepods, which nothing would remove after the test.
	n := startNode(t, filepath.Join(dir, "jet"), "", "--runtime-endpoint", "unix://"+sock, "--cgroups-per-qos=false")

	stop()
	n.publish("late", podJSON("late", 1, "Always", "exec sleep 600"))
	r := n.results("late", 1)[0]
	if r.Outcome != schemas.OutcomeFailed || !strings.Contains(r.Error, "unavailable") {
		t.Errorf("with the runtime down: %s %q, want Failed naming the runtime", r.Outcome, r.Error)
	}

	stop = startRuntime(t, rtDir, sock)
	defer stop()
	// Retried with back-off until it runs.
	n.waitStatus("late", 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	n.waitEvent("late", schemas.EventContainerStarted, 10*time.Second, nil)
}
