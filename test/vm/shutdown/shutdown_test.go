//go:build jetlet_vm

package shutdown

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/vm/vmguest"
)

const (
	node = "guest"
	// order is where the pods' hooks and handlers write, on the guest's
	// disk (kept across the boots).
	orderDir = "/var/lib/shutdown-test"
)

// pod is an apply intent whose container and preStop hook write
// "<uid>-<what> <uptime>" lines to the order file; onTerm is the
// container's SIGTERM handler's end (exit, or carry on).
func pod(uid, priority string, grace int, onTerm string) string {
	note := func(what string) string {
		return fmt.Sprintf(`read up _ </proc/uptime; echo %s-%s $up >> $JETLET_ROOTFS/order/order`, uid, what)
	}
	app := fmt.Sprintf(`trap '%s; %s' TERM; while :; do sleep 1; done`, note("term"), onTerm)
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", app})
	hook, _ := json.Marshal([]string{"/bin/sh", "-c", note("prestop")})
	if priority != "" {
		priority = `"priority":` + priority + `,`
	}
	return fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":%q,"namespace":"default","uid":%q},
	    "spec":{"restartPolicy":"Always",%s"terminationGracePeriodSeconds":%d,
	      "volumes":[{"name":"order","hostPath":{"path":%q,"type":"Directory"}}],
	      "containers":[{"name":"app","image":"busybox:1.36","command":%s,
	        "volumeMounts":[{"name":"order","mountPath":"/order"}],
	        "lifecycle":{"preStop":{"exec":{"command":%s}}}}]}}}`, uid, uid, priority, grace, orderDir, cmd, hook)
}

// The pods: web and batch are not critical (20 s of the 30 for them),
// batch carries on after SIGTERM, so its group takes its 20 s; critical
// (system-node-critical's priority) stops last, with its own 5 s.
var pods = map[string]string{
	"web":      pod("web", "", 60, "exit 0"),
	"batch":    pod("batch", "", 60, ":"),
	"critical": pod("critical", "2000001000", 5, "exit 0"),
}

// Graceful node shutdown on a real host: systemd 252 as PID 1 and its
// logind. Boot 1 installs nats-server and jetlet as docs/deploy.md does
// (jetlet with --shutdown-grace-period=30s and 10s for critical pods), runs
// the pods, checks that jetlet holds logind's delay lock and raised
// InhibitDelayMaxSec, and powers the guest off. Boot 2 reads what the
// shutdown left on the bus and on the disk.
func TestGracefulShutdownOnPoweroff(t *testing.T) {
	switch vmguest.Boot() {
	case 1:
		beforePoweroff(t)
	case 2:
		afterPoweroff(t)
	default:
		t.Fatalf("boot %d: the test powers off once", vmguest.Boot())
	}
}

func beforePoweroff(t *testing.T) {
	// A persistent journal, so that boot 2 shows jetlet's log of the shutdown.
	vmguest.Output(t, "mkdir", "-p", "/var/log/journal")
	vmguest.Output(t, "systemd-tmpfiles", "--create", "--prefix", "/var/log/journal")
	vmguest.Output(t, "journalctl", "--flush")
	vmguest.InstallUnits(t, vmguest.Units{
		NATS: true,
		JetletEnv: []string{
			"JETLET_NODE=" + node,
			"JETLET_NATS_URL=" + vmguest.NATSURL,
			"JETLET_POD_SECURITY=privileged", // the order file is a hostPath
			"JETLET_SHUTDOWN_GRACE_PERIOD=30s",
			"JETLET_SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS=10s",
		},
	})
	if err := os.MkdirAll(orderDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// nats-server comes back at boot 2; jetlet does not, so that what it
	// stored at the shutdown is what boot 2 reads.
	vmguest.Systemctl(t, "enable", "--now", "nats-server.service")
	vmguest.Systemctl(t, "start", "jetlet.service")
	js := vmguest.Connect(t)
	// busybox, imported as a user without a registry does, into the
	// running jetlet's embedded runtime.
	poll.Until(t, 2*time.Minute, poll.Msg("jetlet's image import socket"), func() bool {
		_, err := os.Stat(filepath.Join(vmguest.JetletDataDir, "image-import.sock"))
		return err == nil
	})
	jetlettest.ImportTestImages(t, vmguest.JetletDataDir)
	for uid, body := range pods {
		if _, err := js.Publish(t.Context(), "jetlet.intent."+node+"."+uid, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	kv, err := js.KeyValue(t.Context(), schemas.BucketStatus)
	if err != nil {
		t.Fatal(err)
	}
	for uid := range pods {
		poll.Until(t, 3*time.Minute, poll.Msg(uid+" running"), func() bool {
			st, ok := jetlettest.PodStatus(t, kv, node, uid)
			return ok && st.Phase == schemas.PhaseRunning
		})
	}
	poll.Until(t, time.Minute, func() string {
		return "jetlet's delay lock in: " + vmguest.Output(t, "systemd-inhibit", "--list", "--no-pager")
	}, func() bool {
		out := vmguest.Output(t, "systemd-inhibit", "--list", "--no-pager")
		return strings.Contains(out, "jetlet") && strings.Contains(out, "delay")
	})
	// 30 s and jetlet's 5 s to publish, above logind's default of 5 s.
	if got := vmguest.Output(t, "busctl", "get-property", "org.freedesktop.login1", "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "InhibitDelayMaxUSec"); strings.TrimSpace(got) != "t 35000000" {
		t.Errorf("logind's InhibitDelayMaxUSec: %q, want t 35000000", got)
	}
	t.Logf("inhibitors:\n%s", vmguest.Output(t, "systemd-inhibit", "--list", "--no-pager"))
	if t.Failed() {
		return
	}
	vmguest.Poweroff(t)
}

func afterPoweroff(t *testing.T) {
	t.Cleanup(func() { vmguest.Uninstall(t) }) // the next test of the run starts from no state
	t.Logf("jetlet on the boot before:\n%s", vmguest.Output(t, "journalctl", "-b", "-1", "-u", "jetlet.service", "--no-pager", "-o", "short-monotonic"))
	if b, err := os.ReadFile("/etc/systemd/logind.conf.d/99-jetlet.conf"); err != nil || !strings.Contains(string(b), "InhibitDelayMaxSec=35\n") {
		t.Errorf("jetlet's logind drop-in: %q, %v; want InhibitDelayMaxSec=35", b, err)
	}
	js := vmguest.Connect(t)
	kv, err := js.KeyValue(t.Context(), schemas.BucketStatus)
	if err != nil {
		t.Fatal(err)
	}
	for uid := range pods {
		st, ok := jetlettest.PodStatus(t, kv, node, uid)
		if !ok || st.Phase != schemas.PhaseFailed || st.Reason != "Terminated" ||
			st.Message != "Pod was terminated in response to imminent node shutdown." {
			t.Errorf("%s's status after the shutdown: %+v; want Failed, Terminated, kubelet's message", uid, st)
		}
		killed, err := jetlettest.ReadAll[schemas.LifecycleEvent](js, schemas.StreamEvents, "jetlet.event."+node+"."+uid+"."+string(schemas.EventContainerKilled))
		if err != nil {
			t.Fatal(err)
		}
		if len(killed) != 1 || killed[0].Reason != "Terminated" {
			t.Errorf("%s's ContainerKilled events: %+v; want one, reason Terminated", uid, killed)
		}
		results, err := jetlettest.ReadAll[schemas.SyncResult](js, schemas.StreamResults, "jetlet.result."+node+"."+uid)
		if err != nil {
			t.Fatal(err)
		}
		if len(results) != 1 || results[0].Outcome != schemas.OutcomeSynced {
			t.Errorf("%s's results: %+v; want its apply's, Synced", uid, results)
		}
	}
	checkOrder(t)
}

// checkOrder reads the order file: the pods that are not critical ran
// their preStop hooks before SIGTERM, and the critical pod's began only once
// their group was done, which batch (carrying on after SIGTERM) made last
// its 20 s.
func checkOrder(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(orderDir, "order"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("order (uptime seconds):\n%s", b)
	at := map[string]float64{}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, up, _ := strings.Cut(line, " ")
		if at[name], err = strconv.ParseFloat(up, 64); err != nil {
			t.Fatalf("order line %q: %v", line, err)
		}
		names = append(names, name)
	}
	pos := func(name string) int { return slices.Index(names, name) }
	for _, uid := range []string{"web", "batch", "critical"} {
		if pos(uid+"-prestop") < 0 || pos(uid+"-term") < pos(uid+"-prestop") {
			t.Errorf("%s: preStop hook at %d, SIGTERM at %d in %q; want the hook first", uid, pos(uid+"-prestop"), pos(uid+"-term"), names)
		}
	}
	for _, before := range []string{"web-term", "batch-term"} {
		if pos(before) > pos("critical-prestop") {
			t.Errorf("%s after critical's preStop hook in %q: the critical pod stopped before the others", before, names)
		}
	}
	// A lower bound only (the hooks take their time under emulation):
	// batch's group cannot end before its 20 s.
	if waited := at["critical-prestop"] - at["batch-prestop"]; waited < 15 {
		t.Errorf("the critical pod's stop began %.1f s after batch's; want its group's 20 s first", waited)
	}
}
