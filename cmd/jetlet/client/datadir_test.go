package client

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// keepPod is a long-running pod with a fixed uid, so that it can be applied
// to another node name as the same pod.
const keepPod = `apiVersion: v1
kind: Pod
metadata: {name: keep, namespace: default, uid: keep-1}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: app
      image: busybox:1.36
      command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`

// TestDataDirKeepsItsNode starts a pod as node n1, then runs jetlet on the
// same data dir as n2: it must refuse, naming both, and kill nothing. With
// --rename-node it becomes n2 and adopts the pod, whose intent was published
// for n2, without restarting it.
func TestDataDirKeepsItsNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jetlet run")
	}
	dataDir, err := os.MkdirTemp("", "jnode") // short: the runtime's socket lives here
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	jetlettest.RemovePodsOnCleanup(t, dataDir)
	start := func(node string, extra ...string) (*jetlettest.Process, *cluster, jetstream.JetStream) {
		p := jetlettest.Start(t, append([]string{"run", "--node", node, "--data-dir", dataDir,
			"--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, extra...)...)
		p.WaitReady(60 * time.Second)
		nc, err := nats.Connect(p.NATSURL(), p.NATSAuth())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return p, &cluster{t: t, url: p.NATSURL(), js: js}, js
	}
	stop := func(p *jetlettest.Process) {
		p.Signal(syscall.SIGTERM)
		if code := p.Wait(30 * time.Second); code != 0 {
			t.Fatalf("exit code %d after SIGTERM, want 0", code)
		}
	}
	running := func(js jetstream.JetStream, key string) string {
		var id string
		poll.Until(t, 60*time.Second, func() string { return key + " running in jetlet_status" }, func() bool {
			id = runningContainer(t, js, key)
			return id != ""
		})
		return id
	}

	p, c, js := start("n1")
	wantCode(t, c.runIn(keepPod, "apply", "-f", "-", "--node", "n1", "--data-dir", dataDir, "--wait"), 0)
	id := running(js, "n1.keep-1")
	stop(p)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	args := []string{"run", "--node", "n2", "--data-dir", dataDir, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}
	second := exec.CommandContext(ctx, jetlettest.Binary(t), args...)
	second.Env = append(second.Environ(), jetlettest.PodNetworkEnv(t, args)...)
	out, err := second.CombinedOutput()
	if err == nil {
		t.Fatalf("jetlet run --node n2 on n1's data dir exited 0; output:\n%s", out)
	}
	if want := `belongs to node "n1", not "n2"`; !strings.Contains(string(out), want) {
		t.Errorf("output does not say %q:\n%s", want, out)
	}
	wantNodeFile(t, dataDir, "n1")

	// Back as n1: the pod kept running; the intent for n2 waits in the stream.
	p, c, js = start("n1")
	if got := running(js, "n1.keep-1"); got != id {
		t.Errorf("after the refused start the container is %s, want %s still running", got, id)
	}
	wantCode(t, c.runIn(keepPod, "apply", "-f", "-", "--node", "n2", "--data-dir", dataDir), 0)
	stop(p)

	_, _, js = start("n2", "--rename-node")
	wantNodeFile(t, dataDir, "n2")
	if got := running(js, "n2.keep-1"); got != id {
		t.Errorf("after the rename the container is %s, want %s adopted", got, id)
	}
	evs, err := jetlettest.ReadAll[schemas.LifecycleEvent](js, schemas.StreamEvents, "jetlet.event.*.keep-1.>")
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		switch ev.Type {
		case schemas.EventContainerDied, schemas.EventContainerKilled, schemas.EventSandboxStopped:
			t.Errorf("pod keep-1 was stopped: %s on %s, %s", ev.Type, ev.Node, ev.Reason)
		}
	}
}

// runningContainer is the id of the running container of the pod under key in
// jetlet_status, or "".
func runningContainer(t *testing.T, js jetstream.JetStream, key string) string {
	t.Helper()
	kv, err := js.KeyValue(t.Context(), schemas.BucketStatus)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(t.Context(), key)
	if err != nil {
		return ""
	}
	var st schemas.PodStatus
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Containers) != 1 || st.Containers[0].State != schemas.ContainerRunning {
		return ""
	}
	return st.Containers[0].ContainerID
}

// wantNodeFile checks the file in which the data dir records its node.
func wantNodeFile(t *testing.T, dataDir, node string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "node"))
	if err != nil || string(b) != node+"\n" {
		t.Errorf("data dir's node file holds %q, %v; want %q", b, err, node+"\n")
	}
}
