// Package logind is the little of systemd-logind's D-Bus API a node's
// graceful shutdown needs (kubelet's nodeshutdown/systemd): its
// InhibitDelayMaxUSec, raised by a drop-in and a reload; a delay inhibitor
// lock of shutdown; the PrepareForShutdown signal. It speaks to the system
// bus ($DBUS_SYSTEM_BUS_ADDRESS, else /run/dbus/system_bus_socket).
package logind

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/jetlet/jetlet/internal/atomicfile"
)

const (
	service   = "org.freedesktop.login1"
	object    = dbus.ObjectPath("/org/freedesktop/login1")
	iface     = "org.freedesktop.login1.Manager"
	systemd   = "org.freedesktop.systemd1"
	systemdOb = dbus.ObjectPath("/org/freedesktop/systemd1")
)

// DefaultConfDir is where logind reads its drop-ins.
const DefaultConfDir = "/etc/systemd/logind.conf.d"

// DropIn is the drop-in jetlet writes to raise InhibitDelayMaxSec
// (kubelet's is 99-kubelet.conf).
const DropIn = "99-jetlet.conf"

// reloadWait is how long RaiseInhibitDelayMax waits for logind to have
// read the drop-in again after its reload (a SIGHUP, which logind handles
// in its own time).
const reloadWait = 5 * time.Second

// Conn is one private connection to the system bus.
type Conn struct {
	bus     *dbus.Conn
	confDir string
}

// Connect connects to the system bus; confDir is where
// RaiseInhibitDelayMax writes its drop-in (DefaultConfDir).
func Connect(confDir string) (*Conn, error) {
	bus, err := dbus.ConnectSystemBus()
	if err != nil {
		return nil, fmt.Errorf("connect to the system bus: %w", err)
	}
	return &Conn{bus: bus, confDir: confDir}, nil
}

// Close closes the connection, which ends PrepareForShutdown's channel; a
// lock taken stays held until closed itself.
func (c *Conn) Close() error { return c.bus.Close() }

// InhibitDelayMax is how long logind waits at most for a delay inhibitor.
func (c *Conn) InhibitDelayMax() (time.Duration, error) {
	v, err := c.bus.Object(service, object).GetProperty(iface + ".InhibitDelayMaxUSec")
	if dbusErr := (dbus.Error{}); errors.As(err, &dbusErr) && dbusErr.Name == "org.freedesktop.DBus.Error.ServiceUnknown" {
		return 0, fmt.Errorf("%w: %w", ErrNoLogind, err)
	}
	if err != nil {
		return 0, fmt.Errorf("read logind's InhibitDelayMaxUSec: %w", err)
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("logind's InhibitDelayMaxUSec is a %s, not a uint64", v.Signature())
	}
	if usec > math.MaxInt64/uint64(time.Microsecond) {
		return time.Duration(math.MaxInt64), nil // infinity
	}
	return time.Duration(usec) * time.Microsecond, nil
}

// RaiseInhibitDelayMax writes InhibitDelayMaxSec=d (whole seconds, rounded
// up) to the drop-in, has logind reload its configuration (systemd's
// KillUnit with SIGHUP, as kubelet does) and waits until logind says d.
func (c *Conn) RaiseInhibitDelayMax(ctx context.Context, d time.Duration) error {
	secs := int64((d + time.Second - 1) / time.Second)
	if err := os.MkdirAll(c.confDir, 0o755); err != nil {
		return err
	}
	body := fmt.Sprintf("# Written by jetlet: its graceful node shutdown (--shutdown-grace-period*) needs logind to wait this long.\n[Login]\nInhibitDelayMaxSec=%d\n", secs)
	path := filepath.Join(c.confDir, DropIn)
	if err := atomicfile.Write(path, []byte(body), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	call := c.bus.Object(systemd, systemdOb).CallWithContext(ctx, systemd+".Manager.KillUnit", 0, "systemd-logind.service", "all", int32(1))
	if call.Err != nil {
		return fmt.Errorf("reload logind (SIGHUP to systemd-logind.service): %w", call.Err)
	}
	ctx, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		got, err := c.InhibitDelayMax()
		if err != nil {
			return err
		}
		if got >= d {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("logind still says InhibitDelayMaxSec %s after %s was written to %s and it was reloaded", got, d, path)
		case <-tick.C:
		}
	}
}

// InhibitShutdown takes a delay inhibitor lock of shutdown: logind waits,
// up to its InhibitDelayMaxSec, until the returned file is closed.
func (c *Conn) InhibitShutdown() (io.Closer, error) {
	var fd dbus.UnixFD
	err := c.bus.Object(service, object).Call(iface+".Inhibit", 0,
		"shutdown", "jetlet", "jetlet stops the node's pods before the host shuts down", "delay").Store(&fd)
	if err != nil {
		return nil, fmt.Errorf("take logind's delay inhibitor lock: %w", err)
	}
	return os.NewFile(uintptr(fd), "logind-inhibitor"), nil
}

// PrepareForShutdown delivers logind's PrepareForShutdown signals (true:
// the host is about to shut down; false: it was cancelled) until the
// connection closes, which closes the channel.
func (c *Conn) PrepareForShutdown() (<-chan bool, error) {
	if err := c.bus.AddMatchSignal(dbus.WithMatchObjectPath(object), dbus.WithMatchInterface(iface), dbus.WithMatchMember("PrepareForShutdown")); err != nil {
		return nil, fmt.Errorf("subscribe to logind's PrepareForShutdown: %w", err)
	}
	signals := make(chan *dbus.Signal, 4)
	c.bus.Signal(signals)
	out := make(chan bool, 1)
	go func() {
		defer close(out)
		for s := range signals {
			if s.Path != object || s.Name != iface+".PrepareForShutdown" || len(s.Body) != 1 {
				continue
			}
			if down, ok := s.Body[0].(bool); ok {
				out <- down
			}
		}
	}()
	return out, nil
}

// ErrNoLogind says the system bus has no logind.
var ErrNoLogind = errors.New("no systemd-logind on the system bus")
