package e2e_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// node is a jetlet run under test and a connection to its NATS.
type node struct {
	t        testing.TB
	name     string
	dataDir  string
	proc     *jetlettest.Process
	js       jetstream.JetStream
	statusKV jetstream.KeyValue
	url      string
	extra    []string
	env      []string // added to jetlet's environment
}

// startNode runs `jetlet run` on the embedded defaults (or --nats-url when
// url is set), waits for /readyz and connects to its NATS.
// mountsTheHost are the flags of a node whose test pods mount host
// directories (hostPath volumes: how these tests see what a pod did), which
// only the privileged Pod Security level admits.
var mountsTheHost = []string{"--pod-security", "privileged"}

func startNode(t testing.TB, dataDir, url string, extra ...string) *node {
	t.Helper()
	return startNodeEnv(t, dataDir, url, nil, extra...)
}

// startNodeEnv is startNode with env added to jetlet's environment.
func startNodeEnv(t testing.TB, dataDir, url string, env []string, extra ...string) *node {
	t.Helper()
	jetlettest.RemovePodsOnCleanup(t, dataDir)
	n := &node{t: t, name: "n1", dataDir: dataDir, url: url, extra: extra, env: env}
	n.start()
	return n
}

func (n *node) start() {
	n.t.Helper()
	args := []string{"run", "--node", n.name, "--data-dir", n.dataDir, "--http-listen", "127.0.0.1:0"}
	if n.url != "" {
		args = append(args, "--nats-url", n.url)
	} else {
		args = append(args, "--nats-listen", "127.0.0.1:0")
	}
	if profileDir() != "" && !slices.Contains(n.extra, "--profiling") {
		args = append(args, "--profiling")
	}
	n.proc = jetlettest.StartEnv(n.t, n.env, append(args, n.extra...)...)
	n.proc.WaitReady(60 * time.Second)
	url := n.url
	opts := []nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}
	if url == "" {
		url = n.proc.NATSURL()
		opts = append(opts, n.proc.NATSAuth())
	}
	if n.js == nil || n.url == "" {
		nc, err := nats.Connect(url, opts...)
		if err != nil {
			n.t.Fatal(err)
		}
		n.t.Cleanup(nc.Close)
		n.js, err = jetstream.New(nc)
		n.statusKV = nil
		if err != nil {
			n.t.Fatal(err)
		}
	}
}

// shortDir is a temporary directory with a path short enough for the
// embedded runtime's unix socket.
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "je2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// sharing returns the intent body with each dir a hostPath volume mounted at
// the same path in every container of its pod. That is how a test and a
// container exchange files, or a container runs a binary the test built: a
// container's root and /tmp are its own when jetlet runs as root.
func sharing(t testing.TB, body string, dirs ...string) string {
	t.Helper()
	var in schemas.PodIntent
	if err := json.Unmarshal([]byte(body), &in); err != nil {
		t.Fatal(err)
	}
	spec := &in.Pod.Spec
	for i, dir := range dirs {
		name := fmt.Sprintf("shared-%d", i)
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: name,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}}})
		mount := corev1.VolumeMount{Name: name, MountPath: dir}
		for j := range spec.InitContainers {
			spec.InitContainers[j].VolumeMounts = append(spec.InitContainers[j].VolumeMounts, mount)
		}
		for j := range spec.Containers {
			spec.Containers[j].VolumeMounts = append(spec.Containers[j].VolumeMounts, mount)
		}
	}
	out, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func (n *node) publish(uid string, body string) uint64 {
	n.t.Helper()
	ack, err := n.js.Publish(n.t.Context(), "jetlet.intent."+n.name+"."+uid, []byte(body))
	if err != nil {
		n.t.Fatal(err)
	}
	return ack.Sequence
}

// podJSON is an apply intent for a one-container pod running script.
func podJSON(uid string, rev int64, restartPolicy, script string) string {
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":%d,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"},
	    "spec":{"restartPolicy":%q,"terminationGracePeriodSeconds":5,
	      "containers":[{"name":"app","image":"busybox:1.36","imagePullPolicy":"IfNotPresent","command":%s}]}}}`,
		rev, strings.ToLower(uid), uid, restartPolicy, cmd)
}

func deleteJSON(uid string, rev int64, grace int) string {
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","op":"delete","revision":%d,"gracePeriodSeconds":%d,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"}}}`, rev, grace, strings.ToLower(uid), uid)
}

// waitMsgs waits until the stream holds at least n messages on filter and
// returns them in order.
func waitMsgs[T any](t testing.TB, js jetstream.JetStream, stream, filter string, n int, timeout time.Duration) []T {
	t.Helper()
	var out []T
	poll.Until(t, timeout, func() string {
		return fmt.Sprintf("%d messages on %s %s, have %d", n, stream, filter, len(out))
	}, func() bool {
		out = readMsgs[T](t, js, stream, filter)
		return len(out) >= n
	})
	return out
}

// readMsgs returns every message on filter now in the stream, in order.
func readMsgs[T any](t testing.TB, js jetstream.JetStream, stream, filter string) []T {
	t.Helper()
	out, err := jetlettest.ReadAll[T](js, stream, filter)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// settledResults returns every result stored once jetlet has settled: it
// publishes a sentinel intent (a delete of a pod the node never had, which
// has nothing to do) and waits for its result first, so that a late
// duplicate of an earlier result is counted too. The sentinel's result is
// left out.
func (n *node) settledResults() []schemas.SyncResult {
	n.t.Helper()
	uid := fmt.Sprintf("sentinel-%d", time.Now().UnixNano())
	seq := n.publish(uid, deleteJSON(uid, 1, 0))
	var all []schemas.SyncResult
	poll.Until(n.t, 60*time.Second, poll.Msg(fmt.Sprintf("the result of sentinel intent %d", seq)), func() bool {
		all = readMsgs[schemas.SyncResult](n.t, n.js, schemas.StreamResults, "jetlet.result."+n.name+".>")
		return slices.ContainsFunc(all, func(r schemas.SyncResult) bool { return r.IntentSeq == seq })
	})
	return slices.DeleteFunc(all, func(r schemas.SyncResult) bool { return strings.HasPrefix(r.UID, "sentinel-") })
}

func (n *node) results(uid string, count int) []schemas.SyncResult {
	n.t.Helper()
	return waitMsgs[schemas.SyncResult](n.t, n.js, schemas.StreamResults, "jetlet.result."+n.name+"."+uid, count, 60*time.Second)
}

// waitEvent waits for an event of the pod matching ok.
func (n *node) waitEvent(uid string, typ schemas.EventType, timeout time.Duration, ok func(schemas.LifecycleEvent) bool) schemas.LifecycleEvent {
	n.t.Helper()
	var found schemas.LifecycleEvent
	poll.Until(n.t, timeout, poll.Msg(fmt.Sprintf("a matching %s event for %s", typ, uid)), func() bool {
		for _, ev := range readMsgs[schemas.LifecycleEvent](n.t, n.js, schemas.StreamEvents, "jetlet.event."+n.name+"."+uid+"."+string(typ)) {
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
func (n *node) status(uid string) (*schemas.PodStatus, bool) {
	n.t.Helper()
	if n.statusKV == nil {
		kv, err := n.js.KeyValue(n.t.Context(), schemas.BucketStatus)
		if err != nil {
			n.t.Fatal(err)
		}
		n.statusKV = kv
	}
	e, err := n.statusKV.Get(n.t.Context(), n.name+"."+uid)
	if err != nil {
		return nil, false
	}
	var st schemas.PodStatus
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		n.t.Fatal(err)
	}
	return &st, true
}

// waitStatus waits until the pod's stored status satisfies ok.
func (n *node) waitStatus(uid string, timeout time.Duration, ok func(*schemas.PodStatus) bool) *schemas.PodStatus {
	n.t.Helper()
	var st *schemas.PodStatus
	poll.Until(n.t, timeout, func() string { return fmt.Sprintf("the status of %s to match; last: %+v", uid, st) }, func() bool {
		var found bool
		st, found = n.status(uid)
		return found && ok(st)
	})
	return st
}
