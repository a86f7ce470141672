package logind_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/internal/logind"
	"github.com/jetlet/jetlet/test/logindtest"
	"github.com/jetlet/jetlet/test/poll"
)

func connect(t *testing.T, l *logindtest.Logind) *logind.Conn {
	t.Helper()
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", l.Address)
	c, err := logind.Connect(l.ConfDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestInhibitAndPrepareForShutdown(t *testing.T) {
	l := logindtest.Start(t, 30*time.Second)
	c := connect(t, l)
	if d, err := c.InhibitDelayMax(); err != nil || d != 30*time.Second {
		t.Fatalf("InhibitDelayMax = %s, %v; want 30s", d, err)
	}
	signals, err := c.PrepareForShutdown()
	if err != nil {
		t.Fatal(err)
	}
	lock, err := c.InhibitShutdown()
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() string { return "the lock held: " + strings.Join(l.Held(), ",") }, func() bool {
		return slices.Equal(l.Held(), []string{"jetlet"})
	})
	l.PrepareForShutdown(t, true)
	if down := <-signals; !down {
		t.Fatal("PrepareForShutdown(true) came as false")
	}
	l.PrepareForShutdown(t, false)
	if down := <-signals; down {
		t.Fatal("PrepareForShutdown(false) came as true")
	}
	if err := lock.Close(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, func() string { return "the lock released: " + strings.Join(l.Held(), ",") }, func() bool {
		return len(l.Held()) == 0
	})
	c.Close()
	if _, open := <-signals; open {
		t.Fatal("the signals' channel is open after Close")
	}
}

func TestRaiseInhibitDelayMax(t *testing.T) {
	l := logindtest.Start(t, 5*time.Second)
	c := connect(t, l)
	if err := c.RaiseInhibitDelayMax(t.Context(), 35*time.Second+time.Millisecond); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(l.ConfDir, logind.DropIn))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nInhibitDelayMaxSec=36\n") {
		t.Fatalf("the drop-in says %q, want InhibitDelayMaxSec=36 (rounded up)", b)
	}
	if d, err := c.InhibitDelayMax(); err != nil || d != 36*time.Second {
		t.Fatalf("after the reload InhibitDelayMax = %s, %v; want 36s", d, err)
	}
}

func TestNoLogind(t *testing.T) {
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path="+filepath.Join(t.TempDir(), "none"))
	if _, err := logind.Connect(logind.DefaultConfDir); err == nil || !strings.Contains(err.Error(), "system bus") {
		t.Fatalf("Connect without a bus = %v, want an error about the system bus", err)
	}
}
