// Package systemdbus is jetlet's side of systemd's D-Bus API: the connection
// to its private socket, transient units' properties, the wait for a job's
// result and the errors systemd answers with. internal/podcgroups makes
// kubelet's slices with it; the embedded runtime puts each pod shim in a
// delegated scope with it (runtime/embedded/cgroups), as runc's systemd
// driver does for a container.
package systemdbus

import (
	"context"
	"errors"
	"fmt"

	systemd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// Dial connects to systemd's private socket (root, no D-Bus daemon needed),
// as kubelet's runc does. The connection closes when ctx is done.
func Dial(ctx context.Context) (*systemd.Conn, error) {
	conn, err := systemd.NewSystemdConnectionContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("connect to systemd: %w", err)
	}
	return conn, nil
}

// Errors systemd answers with.
const (
	ErrUnitExists = "org.freedesktop.systemd1.UnitExists"
	ErrNoSuchUnit = "org.freedesktop.systemd1.NoSuchUnit"
)

// IsError reports whether err is systemd's D-Bus error name.
func IsError(err error, name string) bool {
	var de dbus.Error
	return errors.As(err, &de) && de.Name == name
}

// Prop is a unit property.
func Prop(name string, v any) systemd.Property {
	return systemd.Property{Name: name, Value: dbus.MakeVariant(v)}
}

// WaitJob waits for a job's result: "done", or the failure systemd says.
func WaitJob(ctx context.Context, verb, unit string, done <-chan string) error {
	select {
	case r := <-done:
		if r != "done" {
			return fmt.Errorf("systemd: %s %s: job %s", verb, unit, r)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("systemd: %s %s: %w", verb, unit, context.Cause(ctx))
	}
}
