package containerd_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/syncbuf"
)

// The streams of the node service on containerd: `jetlet exec -it`
// through a pty, `jetlet attach -i` and `jetlet port-forward`, the CLI as
// a real process against a `jetlet run --runtime-endpoint` of containerd,
// which serves the CRI's streaming (its own SPDY server) that the node
// joins to the bus.
func TestStreamsOnContainerd(t *testing.T) {
	s := newSuite(t)
	n := s.startNode()
	// The pods are on the host's network: the web server takes a free
	// port of the host.
	port := jetlettest.FreePort(t)
	shell := s.uid("shell")
	n.applyRunning(shell, s.podJSON(shell, 1, "Always",
		"mkdir -p /tmp/www && echo hello > /tmp/www/index.html && head -c 8388608 /dev/urandom > /tmp/www/big && exec httpd -f -p "+port+" -h /tmp/www"))
	reader := s.uid("reader")
	n.applyRunning(reader, withContainer(t, s.podJSON(reader, 1, "Never",
		`while read l; do echo got $l; [ "$l" = bye ] && exit 5; done`), map[string]any{"stdin": true}))
	cli := func(args ...string) []string {
		return append([]string{args[0], "--nats-url", "nats://" + n.listen, "--data-dir", n.dataDir}, args[1:]...)
	}

	t.Run("exec -it: typing, resize, Ctrl-C and the exit code", func(t *testing.T) {
		term := jetlettest.StartTerminal(t, 24, 80, cli("exec", "-it", "default/p-"+shell, "--", "sh")...)
		term.TypeIn("stty size\r")
		term.WaitFor(0, `24 80\r\n`)
		at := term.Resize(50, 132)
		term.TypeIn("echo sleeping; sleep 600\r")
		at = term.WaitFor(at, `sleeping\r\n`)
		term.TypeIn("\x03") // Ctrl-C: containerd's terminal interrupts the sleep
		term.TypeIn("echo interrupted $?\r")
		term.WaitFor(at, `interrupted 130\r\n`)
		term.TypeIn("exit 7\r")
		if code := term.ExitCode(); code != 7 {
			t.Fatalf("exit code %d, want 7; the terminal shows %q", code, term.Out.String())
		}
	})

	t.Run("attach to a container that reads stdin", func(t *testing.T) {
		cmd := exec.Command(jetlettest.Binary(t), cli("attach", "-i", "default/p-"+reader)...)
		var stdout, stderr syncbuf.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		typed, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if _, err := typed.Write([]byte("one\n")); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 30*time.Second, func() string { return "got one; stdout " + stdout.String() + ", stderr " + stderr.String() }, func() bool {
			return strings.Contains(stdout.String(), "got one\n")
		})
		if _, err := typed.Write([]byte("bye\n")); err != nil {
			t.Fatal(err)
		}
		// The attach ends with the container, with its exit code.
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case <-waited:
		case <-time.After(60 * time.Second):
			t.Fatalf("attach did not end with the container; stdout %q, stderr %q", stdout.String(), stderr.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != 5 || stdout.String() != "got one\ngot bye\n" {
			t.Fatalf("attach -i: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
		}
	})

	t.Run("port-forward: 20 connections at once and 8 MiB checked by hash", func(t *testing.T) {
		out, err := exec.Command(jetlettest.Binary(t), cli("exec", "default/p-"+shell, "--", "sha256sum", "/tmp/www/big")...).Output()
		if err != nil || len(strings.Fields(string(out))) == 0 {
			t.Fatalf("sha256sum in the pod: %q, %v", out, err)
		}
		want := strings.Fields(string(out))[0]
		local := jetlettest.FreePort(t)
		pf := exec.Command(jetlettest.Binary(t), cli("port-forward", "default/p-"+shell, local+":"+port)...)
		stdout, err := pf.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr syncbuf.Buffer
		pf.Stderr = &stderr
		if err := pf.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = pf.Process.Kill(); _ = pf.Wait() })
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || !strings.HasPrefix(line, "Forwarding from") {
			t.Fatalf("port-forward: %q, %v; stderr %q", line, err, stderr.String())
		}
		base := "http://127.0.0.1:" + local
		get := func(path string) (string, error) {
			resp, err := http.Get(base + path)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			h := sha256.New()
			var body strings.Builder
			if _, err := io.Copy(io.MultiWriter(h, &body), resp.Body); err != nil {
				return "", err
			}
			if resp.StatusCode != http.StatusOK {
				return "", fmt.Errorf("status %d", resp.StatusCode)
			}
			if path == "/big" {
				return hex.EncodeToString(h.Sum(nil)), nil
			}
			return body.String(), nil
		}
		// httpd listens once the pod wrote its files.
		poll.Until(t, 60*time.Second, func() string { return "the pod's web server through the forward; stderr " + stderr.String() }, func() bool {
			body, err := get("/index.html")
			return err == nil && body == "hello\n"
		})
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			wg.Go(func() {
				body, err := get("/index.html")
				if err == nil && body != "hello\n" {
					err = fmt.Errorf("body %q", body)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a connection through the forward: %v; stderr %q", err, stderr.String())
			}
		}
		if sum, err := get("/big"); err != nil || sum != want {
			t.Fatalf("8 MiB through the forward: sha256 %s, %v; want %s", sum, err, want)
		}
	})
}
