// Package containerd_test runs `jetlet run --runtime-endpoint` against a real
// containerd (the one test/e2e/containerd/setup.sh starts) and checks pod
// scenarios end to end: intents in, results, events and status out, and what
// the runtime itself lists. Without JETLET_CRI_ENDPOINT every test skips.
//
// jetlet owns the runtime it drives: at start-up it deletes every pod no
// intent wants. So these tests never run in parallel, and every test removes
// its pods before it ends (delete intents, then a CRI sweep of what is left).
package containerd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/crierr"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

const (
	// runLabel is a pod label (and so a sandbox label) naming the test run,
	// which the CRI sweep selects on.
	runLabel = "jetlet.test/run"
	// labelPodUID is kubelet's (and jetlet's) sandbox and container label.
	labelPodUID = "io.kubernetes.pod.uid"
	// untilTerm runs until SIGTERM, then exits 0 at once (a shell that is
	// PID 1 would otherwise ignore SIGTERM and wait out the grace period).
	untilTerm = "trap 'exit 0' TERM; sleep 3600 & wait"
)

// env is the containerd under test, from setup.sh's env.sh.
type env struct {
	endpoint string
	image    string
}

// needContainerd skips unless JETLET_CRI_ENDPOINT names a CRI runtime.
func needContainerd(t testing.TB) env {
	t.Helper()
	e := env{endpoint: os.Getenv("JETLET_CRI_ENDPOINT"), image: os.Getenv("JETLET_CRI_IMAGE")}
	if e.endpoint == "" {
		t.Skip("JETLET_CRI_ENDPOINT is not set: these tests need a real CRI runtime " +
			"(sudo bash test/e2e/containerd/run.sh, or source $JETLET_CONTAINERD_DIR/env.sh after setup.sh)")
	}
	if e.image == "" {
		t.Fatal("JETLET_CRI_ENDPOINT is set but JETLET_CRI_IMAGE is not: name an image present in the runtime (with a tag, so IfNotPresent finds it)")
	}
	return e
}

// criClient connects jetlet's own CRI client to the runtime, for checks
// and clean-up behind jetlet's back.
func criClient(t testing.TB, e env) *runtime.Client {
	t.Helper()
	c, err := runtime.New(runtime.Config{Endpoint: e.endpoint, RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		t.Fatalf("connect to %s: %v", e.endpoint, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// shortDir is a temporary directory with a short path (unix sockets, and
// containerd's log paths under it).
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "jce")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// suite is one test's view of containerd and of the jetlet driving it.
type suite struct {
	t     testing.TB
	env   env
	cri   *runtime.Client
	runID string
	node  *node
	uids  []string // pods this test made, deleted at the end
	// deleted: deletePods ran (it is registered once per jetlet start).
	deleted bool
}

// newSuite checks for containerd, and arranges that whatever this test
// leaves in the runtime is removed when it ends, even when it fails.
func newSuite(t testing.TB) *suite {
	t.Helper()
	e := needContainerd(t)
	s := &suite{t: t, env: e, cri: criClient(t, e), runID: uuid.NewString()[:8]}
	// Registered before jetlet starts, so it runs after jetlet was killed:
	// nothing re-creates what the sweep removes.
	t.Cleanup(s.sweep)
	return s
}

// uid is a pod UID unique to this run.
func (s *suite) uid(name string) string {
	u := name + "-" + s.runID
	s.uids = append(s.uids, u)
	return u
}

// sweep removes every sandbox (and so every container) of this run that is
// still in the runtime. Anything it finds after a passing test is an error:
// jetlet's deletes should have removed it.
func (s *suite) sweep() {
	left := s.removeRun(2 * time.Minute)
	if len(left) > 0 && !s.t.Failed() {
		s.t.Errorf("sweep: %d sandboxes of this test still in the runtime after its pods were deleted", len(left))
	}
	for _, p := range left {
		s.t.Logf("sweep: removed sandbox %s (%s/%s, %s)", p.Id, p.Metadata.GetNamespace(), p.Metadata.GetName(), p.State)
	}
	// And the pod cgroups jetlet made, where it had no time to.
	for _, uid := range s.uids {
		jetlettest.RemovePodCgroups(s.t, uid)
	}
}

// removeRun stops and removes every sandbox of this run, behind jetlet's
// back, and returns those it found.
func (s *suite) removeRun(timeout time.Duration) []*runtimeapi.PodSandbox {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	pods, err := s.cri.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{runLabel: s.runID}})
	if err != nil {
		s.t.Errorf("removing the run's sandboxes: ListPodSandbox: %v", err)
		return nil
	}
	for _, p := range pods {
		if err := s.cri.StopPodSandbox(ctx, p.Id); err != nil {
			s.t.Errorf("removing the run's sandboxes: StopPodSandbox %s: %v", p.Id, err)
		}
		if err := s.cri.RemovePodSandbox(ctx, p.Id); err != nil {
			s.t.Errorf("removing the run's sandboxes: RemovePodSandbox %s: %v", p.Id, err)
		}
	}
	return pods
}

// systemdDriver reports whether the runtime's cgroup driver is systemd, as
// its RuntimeConfig says (containerd 1.6 has none: cgroupfs, jetlet's
// --cgroup-driver default).
func (s *suite) systemdDriver(t testing.TB) bool {
	t.Helper()
	resp, err := s.cri.RuntimeConfig(context.Background())
	if err != nil && !errors.Is(err, crierr.ErrUnimplemented) {
		t.Fatal(err)
	}
	// SYSTEMD is the enum's zero: an answer without its Linux part says none.
	return resp.GetLinux() != nil && resp.GetLinux().GetCgroupDriver() == runtimeapi.CgroupDriver_SYSTEMD
}

// directCgroupParent is the cgroup_parent of a sandbox a test makes through
// the CRI itself: none with cgroupfs (containerd's /k8s.io/<id>); with the
// systemd driver a slice, which runc then requires.
func (s *suite) directCgroupParent(t testing.TB) string {
	if s.systemdDriver(t) {
		return "system.slice"
	}
	return ""
}

// node is a `jetlet run` against the runtime and a connection to its
// embedded NATS.
type node struct {
	s       *suite
	t       testing.TB
	name    string
	dataDir string
	listen  string // --nats-listen; the first start's port is kept for restarts
	proc    *jetlettest.Process
	nc      *nats.Conn
	js      jetstream.JetStream
	// statusKV is jetlet_status, looked up once per connection.
	statusKV jetstream.KeyValue
}

// startNode runs jetlet on a fresh data dir, waits for /readyz and
// connects to its NATS. When the test ends, the pods it made are deleted
// through intents while jetlet still runs.
func (s *suite) startNode(extra ...string) *node {
	s.t.Helper()
	n := &node{s: s, t: s.t, name: "ctrd-" + s.runID, dataDir: shortDir(s.t), listen: "127.0.0.1:0"}
	s.node = n
	n.start(extra...)
	return n
}

func (n *node) start(extra ...string) {
	n.t.Helper()
	// The stage's containerd has no CNI network: its pods are on the host's
	// network, which only the privileged Pod Security level admits.
	args := []string{"run", "--node", n.name, "--data-dir", n.dataDir,
		"--runtime-endpoint", n.s.env.endpoint, "--pod-security", "privileged",
		"--nats-listen", n.listen, "--http-listen", "127.0.0.1:0"}
	n.proc = jetlettest.Start(n.t, append(args, extra...)...)
	n.proc.WaitReady(60 * time.Second)
	url := n.proc.NATSURL()
	n.listen = strings.TrimPrefix(url, "nats://")
	nc, err := nats.Connect(url, n.proc.NATSAuth(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(nc.Close)
	n.nc, n.statusKV = nc, nil
	if n.js, err = jetstream.New(nc); err != nil {
		n.t.Fatal(err)
	}
	// Cleanups run last-registered first: this one runs before this
	// process is killed (jetlettest registered that in Start).
	n.t.Cleanup(n.s.deletePods)
}

// kill9 kills jetlet with SIGKILL (its embedded NATS dies with it) and waits
// for it to be gone.
func (n *node) kill9() {
	n.t.Helper()
	n.proc.Signal(syscall.SIGKILL)
	n.proc.Wait(30 * time.Second)
	n.nc.Close()
}

// deletePods publishes a delete intent for each pod the test made and waits
// for the results, while jetlet still runs. Failures are only logged: the
// sweep after it removes what is left, and reports it.
func (s *suite) deletePods() {
	n := s.node
	if s.deleted || n == nil || n.proc.Exited() || len(s.uids) == 0 {
		return
	}
	s.deleted = true
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	want := map[string]uint64{}
	for _, uid := range s.uids {
		ack, err := n.js.Publish(ctx, n.subject(uid), []byte(deleteJSON(uid, 1<<40, 2)))
		if err != nil {
			s.t.Logf("cleanup: delete intent for %s: %v", uid, err)
			continue
		}
		want[uid] = ack.Sequence
	}
	for uid, seq := range want {
		for ctx.Err() == nil {
			if r, ok := n.resultFor(uid, seq); ok {
				if r.Outcome != schemas.OutcomeSynced {
					s.t.Logf("cleanup: delete %s: %s %s", uid, r.Outcome, r.Error)
				}
				break
			}
			time.Sleep(100 * time.Millisecond) // polling with a deadline
		}
		if ctx.Err() != nil {
			s.t.Logf("cleanup: no result for the delete of %s", uid)
			return
		}
	}
	s.awaitCollection(n)
}

// awaitCollection waits, up to jetlet's garbage collection period and a
// margin, until the runtime holds no sandbox of this run. A delete's result
// comes after its collection, yet rarely (seen on containerd 2 only, the
// cause not found) a sandbox stays NOTREADY until the collection after:
// each that outlived its pod's delete is logged with jetlet's lines about
// it. What is still there at the deadline fails the sweep.
func (s *suite) awaitCollection(n *node) {
	start := time.Now()
	outlived := map[string]*runtimeapi.PodSandbox{}
	poll.Within(time.Minute+15*time.Second, func() bool {
		left, err := s.cri.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{runLabel: s.runID}})
		for _, p := range left {
			outlived[p.Id] = p
		}
		return err != nil || len(left) == 0
	})
	for _, p := range outlived {
		s.t.Logf("cleanup: sandbox %s (%s) outlived its pod's delete (%s waited); jetlet's lines about it:", p.Id, p.State, time.Since(start).Round(time.Second))
		for _, line := range strings.Split(n.proc.Logs(), "\n") {
			if strings.Contains(line, p.Id[:12]) || strings.Contains(line, p.Metadata.GetUid()) {
				s.t.Log(line)
			}
		}
	}
}

func (n *node) subject(uid string) string { return "jetlet.intent." + n.name + "." + uid }

func (n *node) publish(uid, body string) uint64 {
	n.t.Helper()
	ack, err := n.js.Publish(context.Background(), n.subject(uid), []byte(body))
	if err != nil {
		n.t.Fatal(err)
	}
	return ack.Sequence
}

// podJSON is an apply intent for a one-container, host-network pod running
// script in the test image.
func (s *suite) podJSON(uid string, rev int64, restartPolicy, script string) string {
	return s.podJSONWithImage(uid, rev, restartPolicy, s.env.image, script)
}

// podJSONWithImage is podJSON with another image (pull policy IfNotPresent).
func (s *suite) podJSONWithImage(uid string, rev int64, restartPolicy, image, script string) string {
	return s.podJSONPulling(uid, rev, restartPolicy, image, "IfNotPresent", script)
}

// podJSONPulling is podJSONWithImage with the pull policy pull.
func (s *suite) podJSONPulling(uid string, rev int64, restartPolicy, image, pull, script string) string {
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":%d,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s","labels":{%q:%q}},
	    "spec":{"restartPolicy":%q,"hostNetwork":true,"terminationGracePeriodSeconds":5,
	      "containers":[{"name":"app","image":%q,"imagePullPolicy":%q,"command":%s}]}}}`,
		rev, uid, uid, runLabel, s.runID, restartPolicy, image, pull, cmd)
}

// withPodSpec is the intent body with fields set in its pod's spec.
func withPodSpec(t testing.TB, body string, fields map[string]any) string {
	t.Helper()
	return editSpec(t, body, func(spec map[string]any) { maps.Copy(spec, fields) })
}

// withContainer is the intent body with fields set in its pod's first
// container.
func withContainer(t testing.TB, body string, fields map[string]any) string {
	t.Helper()
	return editSpec(t, body, func(spec map[string]any) {
		maps.Copy(spec["containers"].([]any)[0].(map[string]any), fields)
	})
}

// editSpec is the intent body with its pod's spec edited.
func editSpec(t testing.TB, body string, edit func(spec map[string]any)) string {
	t.Helper()
	var intent map[string]any
	if err := json.Unmarshal([]byte(body), &intent); err != nil {
		t.Fatal(err)
	}
	edit(intent["pod"].(map[string]any)["spec"].(map[string]any))
	b, err := json.Marshal(intent)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// applyRunning publishes the apply intent body of the pod and waits for its
// result, Synced, then for the pod to run; it returns the running status.
func (n *node) applyRunning(uid, body string) *schemas.PodStatus {
	n.t.Helper()
	seq := n.publish(uid, body)
	if r := n.waitResult(uid, seq, 60*time.Second); r.Outcome != schemas.OutcomeSynced {
		n.t.Fatalf("apply: %s %q %+v", r.Outcome, r.Error, r.Actions)
	}
	return n.waitStatus(uid, 60*time.Second, "Running", running)
}

func deleteJSON(uid string, rev int64, grace int) string {
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","op":"delete","revision":%d,"gracePeriodSeconds":%d,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"}}}`, rev, grace, uid, uid)
}

// resultFor returns the result of intent seq of the pod, if stored yet.
func (n *node) resultFor(uid string, seq uint64) (schemas.SyncResult, bool) {
	rs, err := jetlettest.ReadAll[schemas.SyncResult](n.js, schemas.StreamResults, "jetlet.result."+n.name+"."+uid)
	if err != nil {
		return schemas.SyncResult{}, false
	}
	for _, r := range rs {
		if r.IntentSeq == seq {
			return r, true
		}
	}
	return schemas.SyncResult{}, false
}

// waitResult waits for the result of intent seq.
func (n *node) waitResult(uid string, seq uint64, timeout time.Duration) schemas.SyncResult {
	n.t.Helper()
	var r schemas.SyncResult
	poll.Until(n.t, timeout, poll.Msg(fmt.Sprintf("the result of intent %d of %s", seq, uid)), func() bool {
		var ok bool
		r, ok = n.resultFor(uid, seq)
		return ok
	})
	return r
}

// events returns the pod's events of type typ stored so far.
func (n *node) events(uid string, typ schemas.EventType) []schemas.LifecycleEvent {
	n.t.Helper()
	evs, err := jetlettest.ReadAll[schemas.LifecycleEvent](n.js, schemas.StreamEvents, "jetlet.event."+n.name+"."+uid+"."+string(typ))
	if err != nil {
		n.t.Fatal(err)
	}
	return evs
}

// waitEvent waits for an event of the pod matching ok (nil: any).
func (n *node) waitEvent(uid string, typ schemas.EventType, timeout time.Duration, ok func(schemas.LifecycleEvent) bool) schemas.LifecycleEvent {
	n.t.Helper()
	var found schemas.LifecycleEvent
	var seen int
	what := func() string { return fmt.Sprintf("a matching %s event for %s (%d of that type)", typ, uid, seen) }
	poll.Until(n.t, timeout, what, func() bool {
		evs := n.events(uid, typ)
		seen = len(evs)
		for _, ev := range evs {
			if ok == nil || ok(ev) {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// status reads the pod's status from jetlet_status.
func (n *node) status(uid string) (*schemas.PodStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n.statusKV == nil {
		kv, err := n.js.KeyValue(ctx, schemas.BucketStatus)
		if err != nil {
			return nil, err
		}
		n.statusKV = kv
	}
	e, err := n.statusKV.Get(ctx, n.name+"."+uid)
	if err != nil {
		return nil, err
	}
	var st schemas.PodStatus
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// waitStatus waits until the pod's stored status satisfies ok.
func (n *node) waitStatus(uid string, timeout time.Duration, what string, ok func(*schemas.PodStatus) bool) *schemas.PodStatus {
	n.t.Helper()
	var last *schemas.PodStatus
	var lastErr error
	seen := func() string {
		b, _ := json.Marshal(last)
		return fmt.Sprintf("the status of %s to be %s; last: %s (error %v)", uid, what, b, lastErr)
	}
	poll.Until(n.t, timeout, seen, func() bool {
		st, err := n.status(uid)
		if err != nil {
			if !errors.Is(err, jetstream.ErrKeyNotFound) {
				lastErr = err
			}
			return false
		}
		last = st
		return ok(st)
	})
	return last
}

// podSandboxes and podContainers are what the runtime lists for the pod
// (any state).
func (s *suite) podSandboxes(uid string) []*runtimeapi.PodSandbox {
	s.t.Helper()
	ps, err := s.cri.ListPodSandbox(context.Background(), &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{labelPodUID: uid}})
	if err != nil {
		s.t.Fatalf("ListPodSandbox: %v", err)
	}
	return ps
}

func (s *suite) podContainers(uid string) []*runtimeapi.Container {
	s.t.Helper()
	cs, err := s.cri.ListContainers(context.Background(), &runtimeapi.ContainerFilter{LabelSelector: map[string]string{labelPodUID: uid}})
	if err != nil {
		s.t.Fatalf("ListContainers: %v", err)
	}
	return cs
}

// waitLog waits until the container's CRI log (the file the runtime
// writes) holds a line containing text.
func (s *suite) waitLog(containerID, text string, timeout time.Duration) {
	s.t.Helper()
	poll.Until(s.t, timeout, poll.Msg(fmt.Sprintf("container %s to log %q", containerID, text)), func() bool {
		resp, err := s.cri.ContainerStatus(context.Background(), containerID, false)
		if err != nil {
			s.t.Fatalf("ContainerStatus %s: %v", containerID, err)
		}
		p := resp.GetStatus().GetLogPath()
		b, err := os.ReadFile(p)
		return p != "" && err == nil && strings.Contains(string(b), text)
	})
}

// waitContainerdLog waits until containerd's log (setup.sh keeps it in
// $JETLET_CONTAINERD_DIR/containerd.log) holds every one of lines; without
// that log it only says so.
func (s *suite) waitContainerdLog(timeout time.Duration, lines ...string) {
	s.t.Helper()
	dir := os.Getenv("JETLET_CONTAINERD_DIR")
	path := filepath.Join(dir, "containerd.log")
	if _, err := os.Stat(path); dir == "" || err != nil {
		s.t.Logf("no containerd log to check (JETLET_CONTAINERD_DIR=%q): %v", dir, err)
		return
	}
	var missing []string
	poll.Until(s.t, timeout, func() string { return fmt.Sprintf("%s to hold lines with %q", path, missing) }, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			s.t.Fatal(err)
		}
		missing = missing[:0]
		for _, l := range lines {
			if !strings.Contains(string(b), l) {
				missing = append(missing, l)
			}
		}
		return len(missing) == 0
	})
}
