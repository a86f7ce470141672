package e2e_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/leftovers"
	"github.com/jetlet/jetlet/test/natscluster"
	"github.com/jetlet/jetlet/test/poll"
)

// TestOfflineRebootRunsPodsFromCheckpoint is a node whose bus is gone when
// its host comes back (docs/operations.md, Offline): jetlet on one
// nats-server runs two pods (one crash-looping), then a simulated reboot
// (jetlet and every pod shim SIGKILLed, the server stopped) and jetlet
// started again with the server still down. The pods run again from the
// checkpoint and /readyz says the node is offline; jetlet is SIGKILLed
// while offline and started again, and keeps the running pod as it is.
// Meanwhile intents are published to the server on another port (the
// node cannot reach it). When the server is back on the node's port, the
// intents are applied in order; every intent has exactly one result, no
// event id is stored twice, and every container seen running offline has
// its ContainerStarted on the stream (from the events kept on disk).
func TestOfflineRebootRunsPodsFromCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated reboot with the bus gone")
	}
	t.Parallel()
	port := freeTCPPort(t)
	srv := startNATSServer(t, port, t.TempDir())
	dataDir := shortDir(t)
	n := startNode(t, dataDir, srv.url())
	const run, crash = "off-run", "off-crash"
	n.publish(run, podJSON(run, 1, "Always", "exec sleep 600"))
	n.publish(crash, podJSON(crash, 1, "Always", "sleep 1; exit 3"))
	n.waitStatus(run, 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	n.results(crash, 1)

	// The reboot: jetlet, the pods' shims (with their containers) and the
	// server go at once.
	n.proc.Signal(syscall.SIGKILL)
	n.proc.Wait(30 * time.Second)
	for pid := range leftovers.Shims(dataDir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	poll.Until(t, 30*time.Second, poll.Msg("every pod shim gone"), func() bool { return len(leftovers.Shims(dataDir)) == 0 })
	srv.stop()

	bootedAt := time.Now()
	startOffline(t, n)
	cri := jetlettest.CRIClient(t, dataDir, time.Minute)
	seen := map[string]string{} // every container id seen running -> pod uid
	runID := ""
	poll.Until(t, 60*time.Second, poll.Msg("pod "+run+" running again with the bus gone"), func() bool {
		runID = runningContainer(t, cri, run, seen)
		return runID != ""
	})
	t.Logf("offline start to pod running: %s", time.Since(bootedAt).Round(time.Millisecond))
	// The crash-looping pod restarts offline with its back-off: two
	// instances at least.
	poll.Until(t, 90*time.Second, poll.Msg("pod "+crash+" restarted offline"), func() bool {
		runningContainer(t, cri, crash, seen)
		return countOf(seen, crash) >= 2
	})
	if body := readyz(t, n.proc); !strings.Contains(body, "offline since") {
		t.Fatalf("/readyz while the bus is gone says:\n%s", body)
	}
	if !jetlettest.OutboxHolds(dataDir) {
		t.Fatal("no event kept on disk while the bus is gone")
	}

	// kill -9 while offline: the next start keeps the running pod and
	// what the previous one kept on disk.
	n.proc.Signal(syscall.SIGKILL)
	n.proc.Wait(30 * time.Second)
	startOffline(t, n)
	poll.Until(t, 90*time.Second, poll.Msg("pod "+crash+" restarted after the second offline start"), func() bool {
		runningContainer(t, cri, crash, seen)
		return countOf(seen, crash) >= 3
	})
	if got := runningContainer(t, cri, run, seen); got != runID {
		t.Fatalf("pod %s's container %.12s was replaced by %.12s across jetlet's restart", run, runID, got)
	}

	// While the node is away, its intents go to the server on another
	// port: a new spec of the running pod (twice), the crash-looping pod
	// deleted, a new pod.
	other := startNATSServer(t, freeTCPPort(t), srv.dir)
	js := connectJS(t, other.url())
	publish := func(uid, body string) uint64 {
		ack, err := js.Publish(t.Context(), "jetlet.intent.n1."+uid, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	const added = "off-added"
	superseded := publish(run, podJSON(run, 2, "Always", "exec sleep 601"))
	newest := publish(run, podJSON(run, 3, "Always", "exec sleep 602"))
	deleted := publish(crash, deleteJSON(crash, 2, 1))
	created := publish(added, podJSON(added, 1, "Always", "exec sleep 600"))
	js.Conn().Close()
	other.stop()

	// The bus comes back where the node looks for it.
	srv.start()
	caughtUp := time.Now()
	n.proc.WaitReady(120 * time.Second)
	st := n.waitStatus(run, 60*time.Second, func(st *schemas.PodStatus) bool {
		return st.Phase == schemas.PhaseRunning && st.IntentSeq == newest
	})
	n.waitStatus(added, 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseRunning })
	n.waitStatus(crash, 60*time.Second, func(st *schemas.PodStatus) bool { return st.Phase == schemas.PhaseTerminated })
	t.Logf("bus back to the stored intents applied: %s (pod %s at intent %d, revision %d)", time.Since(caughtUp).Round(time.Millisecond), run, st.IntentSeq, st.Revision)

	// Exactly one result per intent, the run pod's in intent order.
	results := n.settledResults()
	bySeq := map[uint64]int{}
	for _, r := range results {
		bySeq[r.IntentSeq]++
	}
	for seq, count := range bySeq {
		if count != 1 {
			t.Errorf("intent %d has %d results", seq, count)
		}
	}
	outcome := map[uint64]schemas.Outcome{}
	for _, r := range results {
		outcome[r.IntentSeq] = r.Outcome
	}
	for seq, want := range map[uint64]schemas.Outcome{superseded: schemas.OutcomeSuperseded, newest: schemas.OutcomeSynced, deleted: schemas.OutcomeSynced, created: schemas.OutcomeSynced} {
		if outcome[seq] != want {
			t.Errorf("intent %d: outcome %q, want %q", seq, outcome[seq], want)
		}
	}
	runResults := n.results(run, 3)
	if !slices.IsSortedFunc(runResults, func(a, b schemas.SyncResult) int { return int(a.IntentSeq) - int(b.IntentSeq) }) {
		t.Errorf("results of %s not in intent order: %+v", run, runResults)
	}

	// No event twice; every container seen running offline started on
	// the stream.
	evs := readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event.n1.>")
	ids := map[string]int{}
	started := map[string]bool{}
	for _, ev := range evs {
		if ids[ev.ID]++; ids[ev.ID] == 2 {
			t.Errorf("event %s stored twice", ev.ID)
		}
		if ev.Type == schemas.EventContainerStarted {
			started[ev.ContainerID] = true
		}
	}
	for id, uid := range seen {
		if !started[id] {
			t.Errorf("pod %s's container %.12s ran offline and has no ContainerStarted on the stream", uid, id)
		}
	}
	t.Logf("%d containers seen running offline, %d events on the stream, %d results", len(seen), len(evs), len(results))
}

// startOffline starts the node's jetlet again while its bus is gone: it
// cannot be ready, so it is not waited for.
func startOffline(t *testing.T, n *node) {
	t.Helper()
	args := []string{"run", "--node", n.name, "--data-dir", n.dataDir, "--http-listen", "127.0.0.1:0", "--nats-url", n.url}
	n.proc = jetlettest.StartEnv(t, n.env, append(args, n.extra...)...)
}

// readyz is the body of jetlet's /readyz.
func readyz(t *testing.T, p *jetlettest.Process) string {
	t.Helper()
	resp, err := http.Get(p.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// runningContainer returns the id of pod uid's running container ("" when
// none), adding every running container of it to seen.
func runningContainer(t *testing.T, cri *runtime.Client, uid string, seen map[string]string) string {
	t.Helper()
	id := ""
	for _, c := range jetlettest.RunningContainers(t, cri, uid) {
		seen[c] = uid
		id = c
	}
	return id
}

func countOf(seen map[string]string, uid string) int {
	n := 0
	for _, u := range seen {
		if u == uid {
			n++
		}
	}
	return n
}

// natsServerProc is a nats-server process with JetStream on one port.
type natsServerProc struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startNATSServer(t testing.TB, port int, dir string) *natsServerProc {
	t.Helper()
	s := &natsServerProc{t: t, port: port, dir: dir}
	s.start()
	t.Cleanup(func() {
		if s.cmd != nil {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

func (s *natsServerProc) url() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

// start runs the server (again) and waits until it takes clients.
func (s *natsServerProc) start() {
	s.t.Helper()
	s.cmd = exec.Command(natscluster.Binary(s.t), "-js", "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-sd", s.dir)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(s.cmd, s.done)
	poll.Until(s.t, 30*time.Second, poll.Msg("nats-server taking clients on "+s.url()), func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// stop stops the server (SIGTERM) and waits for it to exit.
func (s *natsServerProc) stop() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.t.Fatal("nats-server did not stop within 30s")
	}
	s.cmd = nil
}

func freeTCPPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func connectJS(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
