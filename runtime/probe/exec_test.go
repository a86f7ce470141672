package probe_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/embedded"
	"github.com/jetlet/jetlet/runtime/probe"
	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/testimages"
)

// runningContainer starts the embedded runtime on a unix socket, connects the
// CRI client to it and runs a sleeping container: the exec handler's real
// path.
func runningContainer(t *testing.T) (*runtime.Client, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "jprobe") // short: the socket's path is limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	bridge, cidr := cnitest.Bridge(t)
	rt, err := embedded.New(embedded.Config{Dir: filepath.Join(dir, "state"), ShimPath: gobuild.Shim.Path(t), Logger: zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel),
		ImageMirror: testimages.ServeLibrary(t), PodBridge: bridge, PodCIDR: cidr})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "cri.sock")
	if err := rt.Start(ctx, sock); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)
	client, err := runtime.New(runtime.Config{Endpoint: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })

	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "p-uid"},
		LogDirectory: filepath.Join(dir, "logs"),
	}
	sb, err := client.RunPodSandbox(ctx, sbCfg, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // its shim and containers go with it, whatever failed
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = client.RemovePodSandbox(ctx, sb)
	})
	image := &runtimeapi.ImageSpec{Image: "busybox"}
	if _, err := client.PullImage(ctx, image, nil, sbCfg); err != nil {
		t.Fatal(err)
	}
	id, err := client.CreateContainer(ctx, sb, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "c"},
		Image:    image,
		Command:  []string{"sleep", "1000"},
		LogPath:  "c.log",
	}, sbCfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.StartContainer(ctx, id); err != nil {
		t.Fatal(err)
	}
	return client, id
}

func TestExec(t *testing.T) {
	client, id := runningContainer(t)
	r := probe.New(client, probe.Config{Version: "test"})
	ctx := t.Context()

	cases := []struct {
		name    string
		cmd     []string
		timeout time.Duration
		ok      bool
		message string // a substring of the message
	}{
		{"exit 0 with output", []string{"sh", "-c", "echo fine"}, 10 * time.Second, true, "fine"},
		{"exit 1: stdout and stderr are the message", []string{"sh", "-c", "echo out; echo err >&2; exit 1"}, 10 * time.Second, false, "out\nerr\n"},
		{"exit 3 without output", []string{"sh", "-c", "exit 3"}, 10 * time.Second, false, "exited with 3"},
		{"timeout", []string{"sleep", "100"}, time.Second, false, "timed out"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.Exec(ctx, id, tc.cmd, tc.timeout)
			if err != nil {
				t.Fatal(err)
			}
			if got.OK != tc.ok || !strings.Contains(got.Message, tc.message) {
				t.Fatalf("got %+v, want OK=%v and a message with %q", got, tc.ok, tc.message)
			}
		})
	}

	t.Run("long output is cut at 10 KiB", func(t *testing.T) {
		got, err := r.Exec(ctx, id, []string{"sh", "-c", "head -c 50000 /dev/zero | tr '\\0' x; exit 1"}, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if got.OK || len(got.Message) != 10<<10 {
			t.Fatalf("OK=%v, message of %d bytes, want a failure with 10 KiB", got.OK, len(got.Message))
		}
	})
	t.Run("a container that does not exist is an error", func(t *testing.T) {
		if got, err := r.Exec(ctx, "no-such-container", []string{"true"}, time.Second); err == nil {
			t.Fatalf("got %+v, want an error", got)
		}
	})
}
