// Package logindtest is a private system bus (a dbus-daemon process) with a
// small logind on it for tests of graceful node shutdown where the host has
// no systemd: org.freedesktop.login1's InhibitDelayMaxUSec, Inhibit (a pipe
// per lock, held while a process other than the bus's logind has it open)
// and PrepareForShutdown, and systemd1's KillUnit, which reloads the delay
// from the test's logind.conf.d as logind does on SIGHUP.
package logindtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

const config = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`

// Logind is the test's bus and logind.
type Logind struct {
	// Address is the bus's, for $DBUS_SYSTEM_BUS_ADDRESS.
	Address string
	// ConfDir is the logind.conf.d KillUnit reads InhibitDelayMaxSec from.
	ConfDir string

	conn *dbus.Conn

	mu    sync.Mutex
	delay time.Duration // guarded by mu
	locks []*lock       // guarded by mu
}

// lock is one inhibitor lock: the pipe whose write end the caller got.
// Once the caller is seen holding it, this logind closes its own copy of
// that end, and a read of the other end ends the moment the caller closes
// its copy: the release, exactly (guarded by Logind.mu but r).
type lock struct {
	What, Who, Why, Mode string
	r, w                 *os.File // w: nil once closed here
	ino                  uint64
	released             time.Time
}

// Start runs a dbus-daemon in a directory of the test's and a logind on it
// whose InhibitDelayMaxUSec is delay; both end with the test.
func Start(t testing.TB, delay time.Duration) *Logind {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "system_bus_socket")
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, config, sock), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dbus-daemon", "--config-file="+conf, "--nofork", "--nopidfile", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start dbus-daemon: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// The address is printed once the bus listens.
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("dbus-daemon printed no address: %v", err)
	}
	l := &Logind{Address: strings.TrimSpace(addr), ConfDir: filepath.Join(dir, "logind.conf.d"), delay: delay}
	if l.conn, err = dbus.Connect(l.Address); err != nil {
		t.Fatalf("connect to the test's bus: %v", err)
	}
	t.Cleanup(func() {
		l.conn.Close()
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, k := range l.locks {
			k.r.Close()
			if k.w != nil {
				k.w.Close()
			}
		}
	})
	for _, name := range []string{"org.freedesktop.login1", "org.freedesktop.systemd1"} {
		if reply, err := l.conn.RequestName(name, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
			t.Fatalf("own %s on the test's bus: %v (%v)", name, reply, err)
		}
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(l.conn.ExportMethodTable(map[string]any{"Inhibit": l.inhibit}, "/org/freedesktop/login1", "org.freedesktop.login1.Manager"))
	must(l.conn.ExportMethodTable(map[string]any{"Get": l.get}, "/org/freedesktop/login1", "org.freedesktop.DBus.Properties"))
	must(l.conn.ExportMethodTable(map[string]any{"KillUnit": l.killUnit}, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager"))
	return l
}

// Env is the environment entry that points a process at the test's bus.
func (l *Logind) Env() string { return "DBUS_SYSTEM_BUS_ADDRESS=" + l.Address }

// Delay is logind's InhibitDelayMaxUSec now.
func (l *Logind) Delay() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.delay
}

// PrepareForShutdown emits the signal, as logind does when the host is
// about to shut down (true) or that was cancelled (false).
func (l *Logind) PrepareForShutdown(t testing.TB, down bool) {
	t.Helper()
	if err := l.conn.Emit("/org/freedesktop/login1", "org.freedesktop.login1.Manager.PrepareForShutdown", down); err != nil {
		t.Fatalf("emit PrepareForShutdown(%v): %v", down, err)
	}
}

// Held is the delay locks of shutdown held now, and who holds them.
func (l *Logind) Held() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var held []string
	for _, k := range l.locks {
		if k.w != nil && openElsewhere(k) {
			// The caller has its end: from now on the pipe tells when it
			// lets go.
			k.w.Close()
			k.w = nil
			go l.waitRelease(k)
		}
		if k.What == "shutdown" && k.Mode == "delay" && k.w == nil && k.released.IsZero() {
			held = append(held, k.Who)
		}
	}
	return held
}

// Released is when the last lock released was, by its holder's close.
func (l *Logind) Released() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, k := range l.locks {
		if k.released.After(last) {
			last = k.released
		}
	}
	return last
}

func (l *Logind) waitRelease(k *lock) {
	var b [1]byte
	k.r.Read(b[:]) // EOF once no write end is open
	l.mu.Lock()
	defer l.mu.Unlock()
	k.released = time.Now()
}

// Taken is how many locks were asked for in all.
func (l *Logind) Taken() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}

func (l *Logind) inhibit(what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, dbus.MakeFailedError(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(r.Fd()), &st); err != nil {
		return 0, dbus.MakeFailedError(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// Both ends stay open here (the reply is sent after this returns);
	// Held looks for the end given away in another file table entry.
	l.locks = append(l.locks, &lock{What: what, Who: who, Why: why, Mode: mode, r: r, w: w, ino: st.Ino})
	return dbus.UnixFD(w.Fd()), nil
}

func (l *Logind) get(iface, prop string) (dbus.Variant, *dbus.Error) {
	if iface != "org.freedesktop.login1.Manager" || prop != "InhibitDelayMaxUSec" {
		return dbus.Variant{}, dbus.NewError("org.freedesktop.DBus.Error.UnknownProperty", []any{prop})
	}
	return dbus.MakeVariant(uint64(l.Delay() / time.Microsecond)), nil
}

var delayLine = regexp.MustCompile(`(?m)^InhibitDelayMaxSec=(\d+)$`)

// killUnit is systemd's KillUnit; SIGHUP to systemd-logind.service reloads
// InhibitDelayMaxSec from the drop-ins, the last one wins.
func (l *Logind) killUnit(unit, who string, signal int32) *dbus.Error {
	if unit != "systemd-logind.service" || signal != int32(syscall.SIGHUP) {
		return dbus.MakeFailedError(fmt.Errorf("unexpected KillUnit(%q, %q, %d)", unit, who, signal))
	}
	files, _ := filepath.Glob(filepath.Join(l.ConfDir, "*.conf"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return dbus.MakeFailedError(err)
		}
		if m := delayLine.FindSubmatch(b); m != nil {
			secs, _ := strconv.ParseInt(string(m[1]), 10, 64)
			l.mu.Lock()
			l.delay = time.Duration(secs) * time.Second
			l.mu.Unlock()
		}
	}
	return nil
}

// openElsewhere reports whether a file descriptor other than this logind's
// two refers to k's pipe, in any process; the caller holds l.mu.
func openElsewhere(k *lock) bool {
	want := fmt.Sprintf("pipe:[%d]", k.ino)
	self := os.Getpid()
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err != nil || target != want {
			continue
		}
		if fd == fmt.Sprintf("/proc/%d/fd/%d", self, k.r.Fd()) || fd == fmt.Sprintf("/proc/%d/fd/%d", self, k.w.Fd()) {
			continue
		}
		return true
	}
	return false
}
