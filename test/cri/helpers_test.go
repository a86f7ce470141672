package cri_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	runLabel = "jetlet.test/run"
	// pathEnv works on a host and in busybox: /bin/sh may start with no PATH.
	pathEnv = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	// waitLimit bounds every poll; generous for slow CI machines.
	waitLimit = 30 * time.Second
)

// Scripts for /bin/sh -c that behave the same on a host and in busybox.
// A shell that is PID 1 in a container ignores SIGTERM unless it traps it,
// and a trap only runs once the foreground command ends, hence "& wait".
const (
	// runUntilTerm runs until SIGTERM, then exits 0. It logs "ready" once
	// the trap is set: see waitReady.
	runUntilTerm = "trap 'exit 0' TERM; echo ready; sleep 3600 & wait"
)

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 50ms until it returns true, failing the test
// when limit passes. Polling with a deadline is how the suite waits for
// state: it never sleeps to synchronise.
func eventually(t testing.TB, limit time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last error: %v", limit, what, lastErr)
		}
		<-tick.C
	}
}

// ensureImage pulls b.Image unless ImageStatus already finds it.
func ensureImage(t testing.TB, b *backend) {
	t.Helper()
	ctx := ctxT(t)
	spec := &runtimeapi.ImageSpec{Image: b.Image}
	st, err := b.client.ImageStatus(ctx, spec, false)
	if err != nil {
		t.Fatalf("ImageStatus(%s): %v", b.Image, err)
	}
	if st.Image != nil {
		return
	}
	if _, err := b.client.PullImage(ctx, spec, nil, nil); err != nil {
		t.Fatalf("PullImage(%s): %v", b.Image, err)
	}
}

// pod is a sandbox made for one test, removed when the test ends.
type pod struct {
	id     string
	config *runtimeapi.PodSandboxConfig
}

// newPod runs a sandbox with host networking and the run label plus labels.
func newPod(t testing.TB, b *backend, labels map[string]string) *pod {
	t.Helper()
	ctx := ctxT(t)
	name := "p-" + uuid.NewString()[:8]
	logDir := filepath.Join(b.logDir, name)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	l := map[string]string{runLabel: b.runID}
	for k, v := range labels {
		l[k] = v
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      name,
			Uid:       uuid.NewString(),
			Namespace: "jetlet-cri-test",
		},
		LogDirectory: logDir,
		Labels:       l,
		Annotations:  map[string]string{"jetlet.test/pod-annotation": "a=b,c"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{
					Network: runtimeapi.NamespaceMode_NODE,
					Pid:     runtimeapi.NamespaceMode_CONTAINER,
					Ipc:     runtimeapi.NamespaceMode_POD,
				},
			},
		},
	}
	id, err := b.client.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := b.client.StopPodSandbox(ctx, id); err != nil {
			t.Errorf("cleanup: StopPodSandbox: %v", err)
		}
		if err := b.client.RemovePodSandbox(ctx, id); err != nil {
			t.Errorf("cleanup: RemovePodSandbox: %v", err)
		}
	})
	return &pod{id: id, config: cfg}
}

// containerSpec is what a test varies in a container.
type containerSpec struct {
	script      string
	labels      map[string]string
	annotations map[string]string
	mounts      []*runtimeapi.Mount
}

// newContainer creates (not starts) a container running /bin/sh -c script.
// Its log goes to <pod log dir>/<name>.log.
func newContainer(t testing.TB, b *backend, p *pod, spec containerSpec) (id, logPath string) {
	t.Helper()
	ensureImage(t, b)
	name := "c-" + uuid.NewString()[:8]
	labels := map[string]string{runLabel: b.runID}
	for k, v := range spec.labels {
		labels[k] = v
	}
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: name},
		Image:       &runtimeapi.ImageSpec{Image: b.Image},
		Command:     []string{"/bin/sh", "-c", spec.script},
		Envs:        []*runtimeapi.KeyValue{{Key: "PATH", Value: []byte(pathEnv)}},
		Labels:      labels,
		Annotations: spec.annotations,
		Mounts:      spec.mounts,
		LogPath:     name + ".log",
		Linux:       &runtimeapi.LinuxContainerConfig{},
	}
	id, err := b.client.CreateContainer(ctxT(t), p.id, cfg, p.config)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	return id, filepath.Join(p.config.LogDirectory, cfg.LogPath)
}

// startedContainer creates and starts a container. It does not wait for a
// state: StartContainer returns once the process runs, and a short script
// may have exited already (see waitContainerState).
func startedContainer(t testing.TB, b *backend, p *pod, spec containerSpec) (id, logPath string) {
	t.Helper()
	id, logPath = newContainer(t, b, p, spec)
	if err := b.client.StartContainer(ctxT(t), id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return id, logPath
}

func containerStatus(t testing.TB, b *backend, id string) *runtimeapi.ContainerStatus {
	t.Helper()
	resp, err := b.client.ContainerStatus(ctxT(t), id, false)
	if err != nil {
		t.Fatalf("ContainerStatus(%s): %v", id, err)
	}
	if resp.Status == nil {
		t.Fatalf("ContainerStatus(%s): no status", id)
	}
	return resp.Status
}

// hostPID is the pid of the container's process on the runtime's host, from
// the verbose status (containerd's "info" has it too): the pid its command
// sees is its pid namespace's.
func hostPID(t testing.TB, b *backend, id string) int {
	t.Helper()
	resp, err := b.client.ContainerStatus(ctxT(t), id, true)
	if err != nil {
		t.Fatalf("ContainerStatus(%s, verbose): %v", id, err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil || info.PID <= 0 {
		t.Fatalf("ContainerStatus(%s, verbose): no pid in info %q (%v)", id, resp.Info["info"], err)
	}
	return info.PID
}

// waitContainerState polls until the container reaches state.
func waitContainerState(t testing.TB, b *backend, id string, state runtimeapi.ContainerState) *runtimeapi.ContainerStatus {
	t.Helper()
	var st *runtimeapi.ContainerStatus
	eventually(t, waitLimit, "container "+id+" to be "+state.String(), func() (bool, error) {
		resp, err := b.client.ContainerStatus(ctxT(t), id, false)
		if err != nil {
			return false, err
		}
		st = resp.Status
		return st.GetState() == state, nil
	})
	return st
}

func listContainerIDs(t testing.TB, b *backend, f *runtimeapi.ContainerFilter) []string {
	t.Helper()
	if f.LabelSelector == nil {
		f.LabelSelector = map[string]string{}
	}
	f.LabelSelector[runLabel] = b.runID // never see other users' containers
	cs, err := b.client.ListContainers(ctxT(t), f)
	if err != nil {
		t.Fatalf("ListContainers(%v): %v", f, err)
	}
	ids := make([]string, 0, len(cs))
	for _, c := range cs {
		ids = append(ids, c.Id)
	}
	return ids
}

func listPodIDs(t testing.TB, b *backend, f *runtimeapi.PodSandboxFilter) []string {
	t.Helper()
	if f.LabelSelector == nil {
		f.LabelSelector = map[string]string{}
	}
	f.LabelSelector[runLabel] = b.runID
	ps, err := b.client.ListPodSandbox(ctxT(t), f)
	if err != nil {
		t.Fatalf("ListPodSandbox(%v): %v", f, err)
	}
	ids := make([]string, 0, len(ps))
	for _, p := range ps {
		ids = append(ids, p.Id)
	}
	return ids
}

// sameSet reports whether got and want hold the same ids.
func sameSet(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, w := range want {
		if seen[w] == 0 {
			return false
		}
		seen[w]--
	}
	return true
}

// waitReady polls the container's log until it holds a "ready" line. A
// container being RUNNING says nothing of how far its shell got: a test that
// signals it must first know its trap is set.
func waitReady(t testing.TB, logPath string) {
	t.Helper()
	eventually(t, waitLimit, "the container to log ready", func() (bool, error) {
		if _, err := os.Stat(logPath); err != nil {
			return false, err
		}
		for _, e := range readCRILog(t, logPath) {
			if e.content == "ready" {
				return true, nil
			}
		}
		return false, nil
	})
}

// logEntry is one line of a CRI log file.
type logEntry struct {
	time    time.Time
	stream  string
	tag     string
	content string
}

// readCRILog parses a CRI log file: "<RFC3339Nano> <stream> <tag> <content>".
func readCRILog(t testing.TB, path string) []logEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	defer f.Close()
	var out []logEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), " ", 4)
		if len(parts) < 3 {
			t.Fatalf("malformed log line %q", sc.Text())
		}
		ts, err := time.Parse(time.RFC3339Nano, parts[0])
		if err != nil {
			t.Fatalf("log line %q: timestamp: %v", sc.Text(), err)
		}
		e := logEntry{time: ts, stream: parts[1], tag: parts[2]}
		if len(parts) == 4 {
			e.content = parts[3]
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read log: %v", err)
	}
	return out
}
