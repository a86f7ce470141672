//go:build jetlet_vm

package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/vm/vmguest"
)

const (
	dataDir = vmguest.JetletDataDir
	node    = "vm1"
)

// Pods: two that run, one that crash-loops.
var pods = []string{"vm-run-1", "vm-run-2", "vm-crash"}

// state is what boot 1 leaves for boot 2.
type state struct {
	Seqs []uint64 `json:"seqs"` // every intent published
}

// TestRebootWithTheBusGone is issue 35's reboot with the bus gone, as an
// operator runs it: jetlet.service and nats-server.service installed as
// docs/deploy.md says, three pods running, nats-server disabled and the
// guest rebooted (`systemctl reboot`). On the next boot every pod runs
// again from the node's checkpoint with the bus still gone (the time from
// boot is logged), /readyz says the node is offline, intents are stored
// meanwhile through a server the node cannot reach; then nats-server is
// started, and the node catches up: each intent has one result, no event
// id is stored twice, the outbox on disk is emptied, the intents stored
// while it was away are applied. (A kill -9 of jetlet while offline is
// test/e2e's TestOfflineRebootRunsPodsFromCheckpoint.)
func TestRebootWithTheBusGone(t *testing.T) {
	statePath := filepath.Join(vmguest.StateDir(t), "state.json")
	switch vmguest.Boot() {
	case 1:
		bootOne(t, statePath)
	case 2:
		bootTwo(t, statePath)
	default:
		t.Fatalf("boot %d: the test reboots once", vmguest.Boot())
	}
}

func bootOne(t *testing.T, statePath string) {
	vmguest.InstallUnits(t, vmguest.Units{
		JetletEnv: []string{"JETLET_NODE=" + node, "JETLET_NATS_URL=" + vmguest.NATSURL, "JETLET_HTTP_LISTEN=" + vmguest.HTTPListen},
		NATS:      true,
	})
	vmguest.Systemctl(t, "enable", "--now", "nats-server.service")
	vmguest.Systemctl(t, "enable", "--now", "jetlet.service")
	vmguest.WaitReady(t, 5*time.Minute)
	jetlettest.ImportTestImages(t, dataDir)
	js := connect(t, vmguest.NATSURL)
	var st state
	for _, uid := range pods {
		// Ends on SIGTERM: a container's init that does not handle it
		// (exec sleep) ignores it, and the reboot would wait systemd's
		// stop timeout for its scope (docs/embedded-runtime.md).
		script := "trap 'exit 0' TERM; while :; do sleep 1; done"
		if uid == "vm-crash" {
			script = "sleep 1; exit 3"
		}
		st.Seqs = append(st.Seqs, publish(t, js, uid, podJSON(uid, 1, script)))
	}
	for _, uid := range pods[:2] {
		waitStatus(t, js, uid, 5*time.Minute, func(s *schemas.PodStatus) bool { return s.Phase == schemas.PhaseRunning })
	}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(statePath, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The bus does not come back with the host.
	vmguest.Systemctl(t, "disable", "nats-server.service")
	vmguest.Reboot(t)
}

func bootTwo(t *testing.T, statePath string) {
	var st state
	data, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("journalctl", "-b", "-u", "jetlet.service", "--no-pager", "-n", "400").CombinedOutput()
			t.Logf("jetlet.service's journal:\n%s", out)
		}
		vmguest.Uninstall(t)
	})
	cri := jetlettest.CRIClient(t, dataDir, 5*time.Minute)
	running := map[string]string{} // pod uid -> its running container
	poll.Until(t, 10*time.Minute, func() string { return fmt.Sprintf("every pod running again with the bus gone; running: %v", running) }, func() bool {
		for _, uid := range pods {
			if ids := jetlettest.RunningContainers(t, cri, uid); len(ids) != 0 {
				running[uid] = ids[0]
			}
		}
		return len(running) == len(pods)
	})
	t.Logf("boot to every pod running (bus gone): %.1fs after the kernel started", uptime(t))
	if body, _ := vmguest.Readyz(); !strings.Contains(body, "offline since") {
		t.Errorf("/readyz with the bus gone says:\n%s", body)
	}

	// Intents stored while the node is away: a server on another port,
	// on the store nats-server.service keeps.
	awayLog, err := os.CreateTemp("", "nats-away-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(awayLog.Name())
	defer awayLog.Close()
	away := exec.Command("runuser", "-u", "nats", "--", "/usr/local/bin/nats-server", "-c", "/etc/nats/nats-server.conf", "-p", "4333")
	away.Env = append(os.Environ(), "NATS_SERVER_NAME="+hostname(t))
	away.Stdout, away.Stderr = awayLog, awayLog
	if err := away.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = away.Wait(); close(exited) }()
	poll.Until(t, 2*time.Minute, func() string {
		said, _ := os.ReadFile(awayLog.Name())
		return "nats-server on port 4333; it said:\n" + string(said)
	}, func() bool {
		c, err := net.Dial("tcp", "127.0.0.1:4333")
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	js := connect(t, "nats://127.0.0.1:4333")
	updated := publish(t, js, pods[0], podJSON(pods[0], 2, "trap 'exit 0' TERM; while :; do sleep 2; done"))
	deleted := publish(t, js, "vm-crash", `{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","op":"delete","revision":2,"gracePeriodSeconds":1,
	  "pod":{"metadata":{"name":"p-vm-crash","namespace":"default","uid":"vm-crash"}}}`)
	st.Seqs = append(st.Seqs, updated, deleted)
	js.Conn().Close()
	_ = away.Process.Signal(syscall.SIGTERM)
	<-exited

	// The bus is back.
	vmguest.Systemctl(t, "start", "nats-server.service")
	back := time.Now()
	vmguest.WaitReady(t, 5*time.Minute)
	js = connect(t, vmguest.NATSURL)
	waitStatus(t, js, pods[0], 5*time.Minute, func(s *schemas.PodStatus) bool {
		return s.Phase == schemas.PhaseRunning && s.IntentSeq == updated
	})
	waitStatus(t, js, "vm-crash", 5*time.Minute, func(s *schemas.PodStatus) bool { return s.Phase == schemas.PhaseTerminated })
	t.Logf("bus back to the stored intents applied: %.1fs", time.Since(back).Seconds())

	var results []schemas.SyncResult
	poll.Until(t, 5*time.Minute, func() string { return fmt.Sprintf("a result for each of intents %v; have %d", st.Seqs, len(results)) }, func() bool {
		results, err = jetlettest.ReadAll[schemas.SyncResult](js, schemas.StreamResults, "jetlet.result."+node+".>")
		return err == nil && len(results) >= len(st.Seqs)
	})
	count := map[uint64]int{}
	for _, r := range results {
		count[r.IntentSeq]++
	}
	for _, seq := range st.Seqs {
		if count[seq] != 1 {
			t.Errorf("intent %d has %d results", seq, count[seq])
		}
	}
	if len(results) != len(st.Seqs) {
		t.Errorf("%d results for %d intents", len(results), len(st.Seqs))
	}
	// Everything kept on disk is stored, once.
	poll.Until(t, 5*time.Minute, poll.Msg("the event outbox emptied"), func() bool { return !jetlettest.OutboxHolds(dataDir) })
	evs, err := jetlettest.ReadAll[schemas.LifecycleEvent](js, schemas.StreamEvents, "jetlet.event."+node+".>")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for _, ev := range evs {
		if ids[ev.ID]++; ids[ev.ID] == 2 {
			t.Errorf("event %s stored twice", ev.ID)
		}
	}
	t.Logf("%d results, %d events on the stream", len(results), len(evs))
}

func podJSON(uid string, rev int64, script string) string {
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":%d,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"},
	    "spec":{"restartPolicy":"Always","terminationGracePeriodSeconds":2,
	      "containers":[{"name":"app","image":"busybox:1.36","imagePullPolicy":"IfNotPresent","command":%s}]}}}`,
		rev, uid, uid, cmd)
}

func connect(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
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

func publish(t *testing.T, js jetstream.JetStream, uid, body string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ack, err := js.Publish(ctx, "jetlet.intent."+node+"."+uid, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

func waitStatus(t *testing.T, js jetstream.JetStream, uid string, timeout time.Duration, ok func(*schemas.PodStatus) bool) {
	t.Helper()
	var last *schemas.PodStatus
	poll.Until(t, timeout, func() string { return fmt.Sprintf("the status of %s to match; last %+v", uid, last) }, func() bool {
		kv, err := js.KeyValue(t.Context(), schemas.BucketStatus)
		if err != nil {
			return false
		}
		st, found := jetlettest.PodStatus(t, kv, node, uid)
		if found {
			last = st
		}
		return found && ok(st)
	})
}

// uptime is the seconds since the kernel started.
func uptime(t *testing.T) float64 {
	t.Helper()
	data, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	s, err := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
