package cri_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/embedded"
	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/testimages"
)

// Features says what a backend supports or needs, so one suite runs against
// runtimes that differ (watermill's pubsub test suite does the same).
type Features struct {
	// Name names the backend in test names.
	Name string
	// Image is the image every container is created from. The suite checks
	// ImageStatus and pulls only when the image is missing, like kubelet's
	// IfNotPresent policy. It must provide /bin/sh with sleep, printf, trap.
	Image string
	// NetworkReady: Status must report NetworkReady. A containerd with no CNI
	// configuration does not (the suite uses host networking either way).
	NetworkReady bool
	// RestartAdoption: the suite owns the runtime process and can stop it and
	// start it again on the same state directory; containers survive. The
	// runtime then runs on the suite's host, which sees its containers' pids.
	RestartAdoption bool
}

// backend is one runtime under test and the client driving it.
type backend struct {
	Features
	client *runtime.Client
	// runID labels every object this backend's tests create.
	runID string
	// logDir holds the sandboxes' log directories.
	logDir string
	// stopRuntime and startRuntime exist when RestartAdoption is set.
	stopRuntime  func(t testing.TB)
	startRuntime func(t testing.TB)
}

const defaultImage = "docker.io/library/busybox:1.36"

// testLogger logs to stderr when JETLET_TEST_LOG is set and nowhere otherwise.
func testLogger() zerolog.Logger {
	if os.Getenv("JETLET_TEST_LOG") == "" {
		return zerolog.Nop()
	}
	return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).With().Timestamp().Logger()
}

// shortTempDir makes a directory short enough for a unix socket path
// (108 bytes), unlike t.TempDir under a long test name.
func shortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "jc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func newClient(t testing.TB, endpoint string) *runtime.Client {
	t.Helper()
	c, err := runtime.New(runtime.Config{
		Endpoint:            endpoint,
		RequestTimeout:      time.Minute,
		ReadRetryMaxElapsed: 2 * time.Second,
		ReconnectMaxDelay:   200 * time.Millisecond,
		Logger:              testLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// embeddedBackend starts runtime/embedded in-process on a fresh state dir.
// Cleanup removes every sandbox (and so every container) before stopping it,
// since containers outlive the runtime by design.
func embeddedBackend(t testing.TB) *backend {
	t.Helper()
	dir := shortTempDir(t)
	stateDir := filepath.Join(dir, "state")
	sock := filepath.Join(dir, "cri.sock")
	shimPath := gobuild.Shim.Path(t)
	bridge, cidr := cnitest.Bridge(t)
	var rt *embedded.Runtime
	start := func(t testing.TB) {
		t.Helper()
		r, err := embedded.New(embedded.Config{Dir: stateDir, ShimPath: shimPath, Logger: testLogger().With().Str("backend", "embedded").Logger(),
			ImageMirror: testimages.ServeLibrary(t), PodBridge: bridge, PodCIDR: cidr})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Start(ctx, sock); err != nil {
			t.Fatal(err)
		}
		rt = r
	}
	stop := func(testing.TB) {
		if rt != nil {
			rt.Stop()
			rt = nil
		}
	}
	start(t)
	t.Cleanup(func() { stop(t) }) // runs after the client's and the sweep's cleanups
	b := &backend{
		Features: Features{
			Name:            "embedded",
			Image:           defaultImage,
			NetworkReady:    true,
			RestartAdoption: true,
		},
		client:       newClient(t, "unix://"+sock),
		runID:        uuid.NewString(),
		logDir:       filepath.Join(dir, "logs"),
		stopRuntime:  stop,
		startRuntime: start,
	}
	t.Cleanup(func() { b.sweep(t) })
	return b
}

// externalBackend connects to JETLET_CRI_ENDPOINT, or returns nil when it is
// not set.
func externalBackend(t testing.TB) *backend {
	t.Helper()
	endpoint := os.Getenv("JETLET_CRI_ENDPOINT")
	if endpoint == "" {
		return nil
	}
	image := os.Getenv("JETLET_CRI_IMAGE")
	if image == "" {
		image = defaultImage
	}
	b := &backend{
		Features: Features{
			Name:         "external",
			Image:        image,
			NetworkReady: os.Getenv("JETLET_CRI_NETWORK_READY") == "1",
		},
		client: newClient(t, endpoint),
		runID:  uuid.NewString(),
		logDir: shortTempDir(t),
	}
	t.Cleanup(func() { b.sweep(t) })
	return b
}

// sweep removes whatever this run left behind (a test that failed half-way
// through its own cleanup, for instance).
func (b *backend) sweep(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sel := map[string]string{runLabel: b.runID}
	pods, err := b.client.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: sel})
	if err != nil && !errors.Is(err, runtime.ErrNotConnected) {
		t.Errorf("sweep: %v", err)
		return
	}
	for _, p := range pods {
		if err := b.client.StopPodSandbox(ctx, p.Id); err != nil {
			t.Errorf("sweep: stop sandbox %s: %v", p.Id, err)
		}
		if err := b.client.RemovePodSandbox(ctx, p.Id); err != nil {
			t.Errorf("sweep: remove sandbox %s: %v", p.Id, err)
		}
	}
}
