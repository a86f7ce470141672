package jetlettest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/embedded"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/leftovers"
	"github.com/jetlet/jetlet/test/poll"
)

// RemovePodsOnCleanup arranges for every pod of the embedded runtime under
// dataDir to be stopped and removed when the test ends, after the jetlet
// processes started later in the test are gone: containers outlive jetlet by
// design, and must not outlive the test. So do the mounts jetlet made for
// them under dataDir (subPath binds, tmpfs volumes): unmounted too, before
// the test's removal of dataDir could go through them. Call it before Start.
func RemovePodsOnCleanup(t testing.TB, dataDir string) {
	t.Helper()
	// Taken now, its bridge goes after the pods on it.
	bridge, cidr := PodNetwork(t, dataDir)
	t.Cleanup(func() {
		rt, err := embedded.New(embedded.Config{Dir: filepath.Join(dataDir, "runtime"), ShimPath: gobuild.Shim.Path(t), Logger: zerolog.Nop(),
			PodBridge: bridge, PodCIDR: cidr})
		if err != nil {
			t.Error(err)
			return
		}
		sock := filepath.Join(dataDir, "cleanup.sock")
		if err := rt.Start(context.Background(), sock); err != nil {
			t.Errorf("cleanup runtime: %v", err)
			return
		}
		defer rt.Stop()
		RemoveAllPods(t, "unix://"+sock)
		leftovers.KillShims(t, dataDir)
		leftovers.Unmount(t, dataDir)
	})
}

// RemoveAllPods stops and removes every sandbox (and so every container) of
// the CRI runtime at endpoint.
func RemoveAllPods(t testing.TB, endpoint string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := runtime.New(runtime.Config{Endpoint: endpoint})
	if err != nil {
		t.Error(err)
		return
	}
	defer client.Close()
	if err := client.Connect(ctx); err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	sandboxes, err := client.ListPodSandbox(ctx, nil)
	if err != nil {
		t.Errorf("cleanup: %v", err)
		return
	}
	for _, sb := range sandboxes {
		// containerd 1.6 may answer "ttrpc: closed" to a kill that meets
		// the container's own exit; a second stop finds it stopped.
		var err error
		poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("cleanup: stop sandbox %s: %v", sb.Id, err) }, func() bool {
			err = client.StopPodSandbox(ctx, sb.Id)
			return err == nil
		})
		if err := client.RemovePodSandbox(ctx, sb.Id); err != nil {
			t.Errorf("cleanup: remove sandbox %s: %v", sb.Id, err)
			continue
		}
		RemovePodCgroups(t, sb.GetMetadata().GetUid())
	}
}
