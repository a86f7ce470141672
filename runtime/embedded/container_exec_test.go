package embedded

import (
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/jetlet/jetlet/test/syncbuf"

	"google.golang.org/grpc/codes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// streamClient is remotecommand's SPDY client, as crictl, critest and
// kubelet's API server proxy speak to a CRI runtime, for a URL that Exec or
// Attach returned. (client-go's WebSocket client wants the v5 channel
// protocol, which the CRI streaming library does not serve: the API server
// translates it to SPDY.)
func streamClient(t *testing.T, rawURL string) remotecommand.Executor {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	e, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (h *harness) execURL(req *runtimeapi.ExecRequest) string {
	h.t.Helper()
	resp, err := h.rs.Exec(ctxT(h.t), req)
	if err != nil {
		h.t.Fatalf("Exec: %v", err)
	}
	return resp.GetUrl()
}

func TestExecStreamsStdinStdoutStderrAndTheExitCode(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	id := h.run(sb, sbCfg, "c", "sleep", "1000")
	url := h.execURL(&runtimeapi.ExecRequest{ContainerId: id, Stdin: true, Stdout: true, Stderr: true,
		Cmd: []string{"sh", "-c", "cat; echo to-stderr >&2; exit 3"}})
	var stdout, stderr syncbuf.Buffer
	err := streamClient(t, url).StreamWithContext(ctxT(t), remotecommand.StreamOptions{
		Stdin: strings.NewReader("echoed\nback\n"), Stdout: &stdout, Stderr: &stderr})
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
		t.Fatalf("got %v, want exit code 3", err)
	}
	if stdout.String() != "echoed\nback\n" || stderr.String() != "to-stderr\n" {
		t.Fatalf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}

	url = h.execURL(&runtimeapi.ExecRequest{ContainerId: id, Stdout: true, Cmd: []string{"echo", "hello"}})
	stdout = syncbuf.Buffer{}
	if err := streamClient(t, url).StreamWithContext(ctxT(t), remotecommand.StreamOptions{Stdout: &stdout}); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "hello\n" {
		t.Fatalf("stdout %q", stdout.String())
	}
}

// sizeQueue hands the client's terminal sizes to the stream, in order.
type sizeQueue chan remotecommand.TerminalSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	size, ok := <-q
	if !ok {
		return nil
	}
	return &size
}

func TestExecWithATerminalTakesItsSize(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	id := h.run(sb, sbCfg, "c", "sleep", "1000")
	// The command waits for the size the client sets last, then shows that
	// the terminal is its stdin, named in its /dev/pts, and its controlling
	// terminal (tty_nr, the 7th field of its stat, is set). Until the
	// client's first size arrives the terminal has none, and busybox's stty
	// says so on stderr, which a terminal merges into stdout: the wait
	// drops it.
	script := `until [ "$(stty size 2>/dev/null)" = "50 132" ]; do :; done
[ -t 0 ] && echo stdin-is-a-tty
case $(tty) in /dev/pts/*) echo named-in-its-dev ;; esac
read -r pid comm state ppid pgrp session tty rest < /proc/self/stat
[ "$tty" != 0 ] && echo has-a-controlling-terminal
echo size $(stty size)`
	url := h.execURL(&runtimeapi.ExecRequest{ContainerId: id, Stdin: true, Stdout: true, Tty: true, Cmd: []string{"sh", "-c", script}})
	sizes := make(sizeQueue, 2)
	sizes <- remotecommand.TerminalSize{Width: 80, Height: 24}
	sizes <- remotecommand.TerminalSize{Width: 132, Height: 50}
	defer close(sizes)
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	var stdout syncbuf.Buffer
	err := streamClient(t, url).StreamWithContext(ctxT(t), remotecommand.StreamOptions{
		Stdin: stdinR, Stdout: &stdout, Tty: true, TerminalSizeQueue: sizes})
	if err != nil {
		t.Fatal(err)
	}
	// A terminal ends lines with \r\n.
	if want := "stdin-is-a-tty\r\nnamed-in-its-dev\r\nhas-a-controlling-terminal\r\nsize 50 132\r\n"; stdout.String() != want {
		t.Fatalf("stdout %q, want %q", stdout.String(), want)
	}
}

func TestExecRefusesWhatCannotRun(t *testing.T) {
	h := newHarness(t)
	ctx := ctxT(t)
	sb, sbCfg := h.pod("p", nil)
	id := h.create(sb, sbCfg, containerConfig("c", nil, "sleep", "1000"))
	_, err := h.rs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Stdout: true, Cmd: []string{"true"}})
	wantCode(t, err, codes.FailedPrecondition)
	_, err = h.rs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: "unknown", Stdout: true, Cmd: []string{"true"}})
	wantCode(t, err, codes.NotFound)
	h.startC(id)
	_, err = h.rs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Stdout: true})
	wantCode(t, err, codes.InvalidArgument)
	_, err = h.rs.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Tty: true, Stderr: true, Cmd: []string{"true"}})
	wantCode(t, err, codes.InvalidArgument)
}
