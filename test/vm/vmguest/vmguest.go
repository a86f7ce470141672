// Package vmguest is what a test running in CI's guest (test/vm) uses to
// act as an operator of that host: install jetlet and nats-server as
// docs/deploy.md does, drive systemd, and power the guest off or reboot it
// to watch what a node does across a shutdown.
//
// Tests that use it run only in the guest: they carry the build constraint
// `jetlet_vm`, which test/vm/run.sh sets, so the host neither builds nor
// skips them. A test that crosses a boot is alone in its binary's run
// (JETLET_VM_RUN=^TestX$, or PKG=^TestX$ to test/vm/run.sh): the guest boots
// again from the same disk and runs the binary again, and the test reads
// Boot to know its phase.
package vmguest

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/leftovers"
	"github.com/jetlet/jetlet/test/poll"
)

// Boot is the boot of the guest the test's binary runs in, counted from
// the first that ran it: 1, then 2 after a shutdown it asked for, and so
// on; 0 outside the guest. (Another package's test may have shut the guest
// down before this one's first run: several packages whose tests cross
// boots share one run.)
func Boot() int {
	n, err := strconv.Atoi(os.Getenv("JETLET_VM_BOOT"))
	if err != nil {
		return 0
	}
	return n
}

// share is the host's directory the guest mounts (test/vm/guest.sh).
func share(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("JETLET_VM_SHARE")
	if dir == "" {
		t.Fatal("JETLET_VM_SHARE is not set: this test runs in test/vm's guest only")
	}
	return dir
}

// StateDir is a directory of the test's own on the host's share: what it
// keeps there survives the guest's boots (a test's temporary directories,
// on the guest's disk, survive them too, but t.TempDir removes its own).
func StateDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(share(t), "state", strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Command is the path of a command test/vm/run.sh built for the guest
// (JETLET_VM_COMMANDS): jetlet, jetlet-shim, nats-server, ...
func Command(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv(gobuild.PrebuiltEnv)
	if dir == "" {
		t.Fatalf("%s is not set: this test runs in test/vm's guest only", gobuild.PrebuiltEnv)
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%v: add its package to JETLET_VM_COMMANDS", err)
	}
	return path
}

// Units is what InstallUnits installs.
type Units struct {
	// JetletEnv is /etc/jetlet/jetlet.env, one VAR=value a line
	// (deploy/systemd/jetlet.env says which); HTTPListen and NATSURL are
	// the addresses the helpers below expect.
	JetletEnv []string
	// NATS installs nats-server.service too, running as the user nats with
	// NATSConfig.
	NATS bool
}

// The guest's nats-server and jetlet, as the tests install them.
const (
	// NATSConfig is one JetStream server on the loopback, storing where
	// nats-server.service keeps its state.
	NATSConfig = `server_name: $NATS_SERVER_NAME
listen: 127.0.0.1:4222
jetstream { store_dir: /var/lib/nats/jetstream }
`
	NATSURL = "nats://127.0.0.1:4222"
	// HTTPListen is jetlet's metrics and health address: JETLET_HTTP_LISTEN.
	HTTPListen = "127.0.0.1:9464"
)

// InstallUnits installs jetlet (with jetlet-shim beside it) and, when asked,
// nats-server as docs/deploy.md does: the binaries in /usr/local/bin, their
// configuration, and the units of deploy/systemd, then reloads systemd. It
// enables and starts nothing: the test does, with Systemctl.
func InstallUnits(t testing.TB, u Units) {
	t.Helper()
	for _, name := range []string{"jetlet", "jetlet-shim"} {
		install(t, Command(t, name), "/usr/local/bin/"+name, 0o755)
	}
	writeFile(t, "/etc/jetlet/jetlet.env", strings.Join(u.JetletEnv, "\n")+"\n", 0o600)
	deploy := filepath.Join(share(t), "deploy", "systemd")
	install(t, filepath.Join(deploy, "jetlet.service"), "/etc/systemd/system/jetlet.service", 0o644)
	if u.NATS {
		install(t, Command(t, "nats-server"), "/usr/local/bin/nats-server", 0o755)
		if _, err := user.Lookup("nats"); errors.As(err, new(user.UnknownUserError)) {
			Output(t, "useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "nats")
		} else if err != nil {
			t.Fatal(err)
		}
		writeFile(t, "/etc/nats/nats-server.conf", NATSConfig, 0o644)
		install(t, filepath.Join(deploy, "nats-server.service"), "/etc/systemd/system/nats-server.service", 0o644)
	}
	Systemctl(t, "daemon-reload")
}

// Data dirs of the units InstallUnits installs (their StateDirectory=).
const (
	JetletDataDir = "/var/lib/jetlet"
	natsStateDir  = "/var/lib/nats"
)

// Uninstall undoes what InstallUnits and a test's run of the units left, so
// that the next test of the guest's run starts from no state (jetlet
// refuses another node's data dir): both units stopped and disabled, the
// pods' shims killed (each pod goes with its shim, its PID 1), the
// mounts below jetlet's data dir undone, and both data dirs removed. A
// test registers it with t.Cleanup in its last boot.
func Uninstall(t testing.TB) {
	t.Helper()
	for _, unit := range []string{"jetlet.service", "nats-server.service"} {
		// Absent when the test installed no nats-server: nothing to undo.
		_ = exec.Command("systemctl", "disable", "--now", unit).Run()
	}
	for pid := range leftovers.Shims(JetletDataDir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	poll.Until(t, time.Minute, poll.Msg("the pod shims under "+JetletDataDir+" gone"), func() bool {
		return len(leftovers.Shims(JetletDataDir)) == 0
	})
	leftovers.Unmount(t, JetletDataDir)
	for _, dir := range []string{JetletDataDir, natsStateDir} {
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	}
}

// Connect connects to the guest's nats-server (NATSURL) once it listens,
// and waits for the streams and buckets jetlet provisions at its start.
func Connect(t testing.TB) jetstream.JetStream {
	t.Helper()
	var nc *nats.Conn
	poll.Until(t, time.Minute, poll.Msg("nats-server on "+NATSURL), func() bool {
		var err error
		nc, err = nats.Connect(NATSURL)
		return err == nil
	})
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 2*time.Minute, poll.Msg("jetlet's streams and buckets"), func() bool {
		_, err := js.KeyValue(t.Context(), schemas.BucketStatus)
		return err == nil
	})
	return js
}

// Readyz is the body and status code of jetlet's /readyz on HTTPListen
// (the error's text and 0 when it does not answer).
func Readyz() (string, int) {
	resp, err := http.Get("http://" + HTTPListen + "/readyz")
	if err != nil {
		return err.Error(), 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body), resp.StatusCode
}

// WaitReady waits until jetlet's /readyz answers 200.
func WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	var body string
	poll.Until(t, timeout, func() string { return "jetlet ready; /readyz: " + body }, func() bool {
		var code int
		body, code = Readyz()
		return code == http.StatusOK
	})
}

// MainPID is the main process of unit (0 when it runs none).
func MainPID(t testing.TB, unit string) int {
	t.Helper()
	out := strings.TrimSpace(Output(t, "systemctl", "show", "-p", "MainPID", "--value", unit))
	pid, err := strconv.Atoi(out)
	if err != nil {
		t.Fatalf("%s's MainPID %q: %v", unit, out, err)
	}
	return pid
}

// Output runs a command and returns its output, failing the test when the
// command fails.
func Output(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Combined is a command's output and its error, if any: for a test's log.
func Combined(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out) + err.Error()
	}
	return string(out)
}

// Systemctl runs systemctl with args and fails the test when it fails.
func Systemctl(t testing.TB, args ...string) {
	t.Helper()
	Output(t, "systemctl", args...)
}

// Poweroff powers the guest off as an operator would (`systemctl
// poweroff`); test/vm/run.sh boots it again and runs the test's binary
// again. It never returns: the shutdown ends the test's process.
func Poweroff(t testing.TB) { shutdown(t, "poweroff") }

// Reboot reboots the guest (`systemctl reboot`); as Poweroff otherwise.
func Reboot(t testing.TB) { shutdown(t, "reboot") }

func shutdown(t testing.TB, verb string) {
	t.Helper()
	// Said first: guest.sh and the host read it to tell a shutdown the
	// test asked for from a crash.
	writeFile(t, filepath.Join(share(t), "out", "shutdown-asked"), fmt.Sprintf("%s (systemctl %s)\n", t.Name(), verb), 0o644)
	t.Logf("systemctl %s on boot %d", verb, Boot())
	Systemctl(t, verb, "--no-block")
	select {}
}

func install(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	// A new file renamed over the old one: a running binary stays intact.
	tmp := to + ".new"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, to); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
