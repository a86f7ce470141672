package jetlettest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/crilabels"
	"github.com/jetlet/jetlet/runtime/embedded"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/leftovers"
)

// CRIClient connects to the embedded runtime of the jetlet whose data dir
// is dataDir, whichever jetlet runs there: the client reconnects across
// its restarts. Connecting waits up to timeout (a jetlet still starting).
func CRIClient(t testing.TB, dataDir string, timeout time.Duration) *runtime.Client {
	t.Helper()
	client, err := runtime.New(runtime.Config{Endpoint: "unix://" + filepath.Join(dataDir, "cri.sock")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	if err := client.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	return client
}

// RunningContainers are the ids of pod uid's running containers; none
// while the runtime cannot answer (restarting with jetlet, say).
func RunningContainers(t testing.TB, cri *runtime.Client, uid string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cs, err := cri.ListContainers(ctx, &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{crilabels.LabelPodUID: uid},
	})
	if err != nil {
		return nil
	}
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.Id
	}
	return ids
}

// OutboxHolds reports whether the node on dataDir keeps an event on disk
// that the bus has not acknowledged yet (its outbox, docs/operations.md).
func OutboxHolds(dataDir string) bool {
	files, _ := filepath.Glob(filepath.Join(dataDir, "outbox", "events", "*.jsonl"))
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil && fi.Size() > 0 {
			return true
		}
	}
	return false
}

// PodStatus reads pod uid's status on node from jetlet_status; false when
// there is none (yet). It works in a cleanup too, where t.Context is done.
func PodStatus(t testing.TB, kv jetstream.KeyValue, node, uid string) (*schemas.PodStatus, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := kv.Get(ctx, node+"."+uid)
	if err != nil {
		return nil, false
	}
	var st schemas.PodStatus
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatalf("%s's status: %v", uid, err)
	}
	return &st, true
}

// StartEmbedded runs the embedded runtime of cfg in the test's process,
// serving CRI on <sockDir>/cri.sock (a short dir: the socket path is
// limited), and returns a client of it. Cleanup removes every sandbox (and
// so every container), stops the runtime, kills any shim left under
// cfg.Dir and removes sockDir.
func StartEmbedded(t testing.TB, cfg embedded.Config, sockDir string) *runtime.Client {
	t.Helper()
	rt, err := embedded.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(sockDir, "cri.sock")
	if err := rt.Start(t.Context(), sock); err != nil {
		t.Fatal(err)
	}
	client, err := runtime.New(runtime.Config{Endpoint: "unix://" + sock, RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if sandboxes, err := client.ListPodSandbox(ctx, nil); err == nil {
			for _, s := range sandboxes {
				_ = client.StopPodSandbox(ctx, s.GetId())
				_ = client.RemovePodSandbox(ctx, s.GetId())
			}
		}
		_ = client.Close()
		rt.Stop()
		leftovers.KillShims(t, cfg.Dir)
		_ = os.RemoveAll(sockDir)
	})
	if err := client.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	return client
}
