package embedded

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jetlet/jetlet/test/syncbuf"

	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (h *harness) attachURL(id string) string {
	h.t.Helper()
	resp, err := h.rs.Attach(ctxT(h.t), &runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		h.t.Fatalf("Attach: %v", err)
	}
	return resp.GetUrl()
}

// attached is a client attached to a container.
type attached struct {
	stdin  *io.PipeWriter
	stdout syncbuf.Buffer
	stderr syncbuf.Buffer
	ended  chan error
}

func (h *harness) attachClient(t *testing.T, id string) *attached {
	t.Helper()
	stdinR, stdinW := io.Pipe()
	a := &attached{stdin: stdinW, ended: make(chan error, 1)}
	e := streamClient(t, h.attachURL(id))
	go func() {
		err := e.StreamWithContext(ctxT(t), remotecommand.StreamOptions{Stdin: stdinR, Stdout: &a.stdout, Stderr: &a.stderr})
		// A write to the stdin of an attach that ended fails, not blocks.
		stdinR.CloseWithError(fmt.Errorf("attach ended: %v", err))
		a.ended <- err
	}()
	t.Cleanup(func() { stdinW.Close() })
	return a
}

// echo writes line to the container's stdin and waits for it to come back
// on the attached stdout.
func (a *attached) echo(t *testing.T, line string) {
	t.Helper()
	before := a.stdout.String()
	if _, err := io.WriteString(a.stdin, line); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the echo of "+line, func() bool { return a.stdout.String() == before+line })
}

func TestAttachToACatWithStdinOnce(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	cfg := containerConfig("cat", nil, "sh", "-c", "echo before-attach; cat")
	cfg.Stdin, cfg.StdinOnce = true, true
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)
	h.waitLog(filepath.Join(h.logs, "p", "cat.log"), "before-attach")

	a := h.attachClient(t, id)
	// The output from the moment of attach: not what came before.
	a.echo(t, "hello\n")
	a.echo(t, "again\n")
	// The client's stdin ends: stdin_once closes the container's,
	// cat ends, and with it the attach.
	a.stdin.Close()
	if err := <-a.ended; err != nil {
		t.Fatal(err)
	}
	if st := h.waitState(id, runtimeapi.ContainerState_CONTAINER_EXITED); st.GetExitCode() != 0 {
		t.Fatalf("exit code %d", st.GetExitCode())
	}
	if a.stdout.String() != "hello\nagain\n" || a.stderr.String() != "" {
		t.Fatalf("stdout %q, stderr %q", a.stdout.String(), a.stderr.String())
	}
	lines := h.waitLog(filepath.Join(h.logs, "p", "cat.log"), "again")
	if len(lines) != 3 {
		t.Fatalf("log %q", lines)
	}
}

func TestAttachKeepsStdinOpenWithoutStdinOnce(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	cfg := containerConfig("cat", nil, "cat")
	cfg.Stdin = true
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)

	first := h.attachClient(t, id)
	first.echo(t, "one\n")
	first.stdin.Close()
	if err := <-first.ended; err != nil {
		t.Fatal(err)
	}
	// cat still reads the stdin the shim keeps: a second client gets it.
	second := h.attachClient(t, id)
	second.echo(t, "two\n")
	if st := h.status(id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("state %v", st.GetState())
	}
	if _, err := h.rs.StopContainer(ctxT(t), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0}); err != nil {
		t.Fatal(err)
	}
	// The container's end ends the attach.
	if err := <-second.ended; err != nil {
		t.Fatal(err)
	}
}

func TestAttachToATTYContainer(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	// The command waits for the size the client sets, turns the terminal's
	// echo off, shows that its stdin is its controlling terminal, then
	// copies its input.
	script := `until [ "$(stty size 2>/dev/null)" = "50 132" ]; do :; done
stty -echo
read -r pid comm state ppid pgrp session tty rest < /proc/self/stat
[ -t 0 ] && [ "$tty" != 0 ] && echo has-a-controlling-terminal
exec cat`
	cfg := containerConfig("tty", nil, "sh", "-c", script)
	cfg.Tty, cfg.Stdin, cfg.StdinOnce = true, true, true
	id := h.create(sb, sbCfg, cfg)
	h.startC(id)

	resp, err := h.rs.Attach(ctxT(t), &runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Tty: true})
	if err != nil {
		t.Fatal(err)
	}
	sizes := make(sizeQueue, 1)
	sizes <- remotecommand.TerminalSize{Width: 132, Height: 50}
	defer close(sizes)
	stdinR, stdinW := io.Pipe()
	var stdout syncbuf.Buffer
	ended := make(chan error, 1)
	go func() {
		ended <- streamClient(t, resp.GetUrl()).StreamWithContext(ctxT(t), remotecommand.StreamOptions{
			Stdin: stdinR, Stdout: &stdout, Tty: true, TerminalSizeQueue: sizes})
	}()
	eventually(t, "the terminal's size", func() bool { return stdout.String() == "has-a-controlling-terminal\r\n" })
	if _, err := io.WriteString(stdinW, "typed\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the echo", func() bool { return stdout.String() == "has-a-controlling-terminal\r\ntyped\r\n" })
	// The client's stdin ends: the attach ends; the terminal, which
	// stdin_once does not close, stays.
	stdinW.Close()
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if st := h.status(id); st.GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("state %v", st.GetState())
	}
	// The log has the terminal's output as stdout.
	lines := h.waitLog(filepath.Join(h.logs, "p", "tty.log"), "typed")
	if len(lines) != 2 || !strings.HasSuffix(lines[0], " stdout F has-a-controlling-terminal") {
		t.Fatalf("log %q", lines)
	}
}
