package jetlettest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/syncbuf"
)

// Terminal is a jetlet command run as a real process on a pty, as a user
// at a terminal runs it (exec -it, attach -it).
type Terminal struct {
	t    testing.TB
	Pty  *os.File // the terminal's side: resize it with pty.Setsize
	Out  syncbuf.Buffer
	cmd  *exec.Cmd
	done chan struct{}
}

// StartTerminal runs jetlet args on a pty of rows and cols; the process is
// killed when the test ends.
func StartTerminal(t testing.TB, rows, cols uint16, args ...string) *Terminal {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	f, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: rows, Cols: cols})
	if err != nil {
		t.Fatal(err)
	}
	term := &Terminal{t: t, Pty: f, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(term.done)
		_, _ = io.Copy(&term.Out, f) // ends with EIO once the process is gone
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		f.Close()
	})
	return term
}

// TypeIn types s at the terminal.
func (term *Terminal) TypeIn(s string) {
	term.t.Helper()
	if _, err := term.Pty.Write([]byte(s)); err != nil {
		term.t.Fatal(err)
	}
}

// WaitFor waits until the terminal shows re after offset, and returns the
// offset after it.
func (term *Terminal) WaitFor(offset int, re string) int {
	term.t.Helper()
	rx := regexp.MustCompile(re)
	var loc []int
	poll.Until(term.t, 30*time.Second, func() string { return fmt.Sprintf("%q on the terminal; it shows %q", re, term.Out.String()) }, func() bool {
		s := term.Out.String()
		if len(s) < offset {
			return false
		}
		loc = rx.FindStringIndex(s[offset:])
		return loc != nil
	})
	return offset + loc[1]
}

// Resize gives the terminal rows and cols and waits until the shell at it
// reports them (`stty size`, asked until it shows: the new size reaches
// the container's terminal asynchronously); it returns the offset after.
func (term *Terminal) Resize(rows, cols uint16) int {
	term.t.Helper()
	at := len(term.Out.String())
	if err := pty.Setsize(term.Pty, &pty.Winsize{Rows: rows, Cols: cols}); err != nil {
		term.t.Fatal(err)
	}
	want := fmt.Sprintf("%d %d\r\n", rows, cols)
	poll.Until(term.t, 30*time.Second, func() string { return "the new size; the terminal shows " + term.Out.String() }, func() bool {
		term.TypeIn("stty size\r")
		return strings.Contains(term.Out.String()[at:], want)
	})
	return len(term.Out.String())
}

// ExitCode waits for the process and returns its exit code.
func (term *Terminal) ExitCode() int {
	term.t.Helper()
	waited := make(chan error, 1)
	go func() { waited <- term.cmd.Wait() }()
	select {
	case <-waited:
	case <-time.After(30 * time.Second):
		term.t.Fatalf("the command did not end; its terminal shows %q", term.Out.String())
	}
	return term.cmd.ProcessState.ExitCode()
}

// FreePort is a loopback TCP port free a moment ago, for a listener the
// test does not open itself (a port-forward's, a pod's on the host's
// network).
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
