package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/syncbuf"
)

// streamPod is a running pod for the stream tests: app runs script (its
// stdin open when stdin), with a terminal when tty.
func streamPod(name, script string, stdin, tty bool) string {
	pod := commandPod(name, script)
	var extra string
	if stdin {
		extra += "    stdin: true\n"
	}
	if tty {
		extra += "    tty: true\n"
	}
	return pod + extra
}

// TestStreamsAgainstJetletRun drives exec -it, attach, port-forward and cp
// against a real `jetlet run` (embedded NATS, embedded runtime), the
// terminal through a pty.
func TestStreamsAgainstJetletRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jetlet run")
	}
	_, c := startJetletRun(t, "shell", "reader", "web")
	wantCode(t, c.runIn(commandPod("shell", "mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www"), "apply", "-f", "-", "--wait"), 0)

	t.Run("exec -it: typing, resize, Ctrl-C, Ctrl-D and the exit code", func(t *testing.T) {
		term := jetlettest.StartTerminal(t, 24, 80, "exec", "--nats-url", c.url, "-it", "default/shell", "--", "sh")
		term.TypeIn("stty size\r")
		term.WaitFor(0, `24 80\r\n`)
		at := term.Resize(50, 132)
		// Ctrl-C once the sleep runs (its line read, the shell's line
		// editing is off): the container's terminal interrupts it.
		term.TypeIn("echo sleeping; sleep 600\r")
		at = term.WaitFor(at, `sleeping\r\n`)
		term.TypeIn("\x03")
		term.TypeIn("echo interrupted $?\r")
		at = term.WaitFor(at, `interrupted 130\r\n`)
		term.TypeIn("exit 7\r")
		if code := term.ExitCode(); code != 7 {
			t.Fatalf("exit code %d, want 7; the terminal shows %q", code, term.Out.String())
		}

		term = jetlettest.StartTerminal(t, 24, 80, "exec", "--nats-url", c.url, "-it", "default/shell", "--", "sh")
		// The shell's answer, not the local echo of the line typed before
		// the terminal went raw: the stream is up.
		term.TypeIn("echo $((6*7))\r")
		term.WaitFor(0, `42\r\n`)
		term.TypeIn("\x04") // Ctrl-D: end of input, the shell exits 0
		if code := term.ExitCode(); code != 0 {
			t.Fatalf("exit code %d after Ctrl-D, want 0; the terminal shows %q", code, term.Out.String())
		}
	})

	t.Run("exec -i without a terminal: stdin to its end, stdout and stderr apart", func(t *testing.T) {
		res := c.streamCmd("line one\nline two\n", "exec", "-i", "default/shell", "--", "sh", "-c", "cat; echo to-stderr >&2; exit 3")
		if res.code != 3 || res.stdout != "line one\nline two\n" || res.stderr != "to-stderr\n" {
			t.Fatalf("exec -i: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
		}
		res = c.streamCmd("", "exec", "-i", "default/shell", "--", "no-such-command")
		if res.code == 0 {
			t.Fatalf("exec -i of no command exited 0: %+v", res)
		}
	})

	t.Run("attach to a container that reads stdin", func(t *testing.T) {
		wantCode(t, c.runIn(streamPod("reader", "while read l; do echo got $l; [ \"$l\" = bye ] && exit 5; done", true, false), "apply", "-f", "-", "--wait"), 0)
		// Stdin stays open: the attach ends when the container exits, with
		// its exit code (an attach whose stdin ends detaches).
		in, typed := io.Pipe()
		defer typed.Close()
		var stdout, stderr syncbuf.Buffer
		done := make(chan int, 1)
		go func() {
			done <- runCLIWith(t.Context(), in, &stdout, &stderr, "attach", "--nats-url", c.url, "-i", "default/reader")
		}()
		// What is typed before the attach is up is not lost: it waits in
		// the stream until the container reads it.
		if _, err := typed.Write([]byte("one\n")); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 30*time.Second, func() string { return "got one; stdout " + stdout.String() + ", stderr " + stderr.String() }, func() bool {
			return strings.Contains(stdout.String(), "got one\n")
		})
		if _, err := typed.Write([]byte("bye\n")); err != nil {
			t.Fatal(err)
		}
		select {
		case code := <-done:
			if code != 5 || stdout.String() != "got one\ngot bye\n" {
				t.Fatalf("attach -i: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("attach did not end with the container; stdout %q", stdout.String())
		}
	})

	t.Run("port-forward: 100 connections at once and a large transfer checked by hash", func(t *testing.T) {
		const size = 64 << 20
		wantCode(t, c.exec("default/shell", "--", "sh", "-c", fmt.Sprintf("head -c %d /dev/urandom > /www/big", size)), 0)
		sum := c.exec("default/shell", "--", "sha256sum", "/www/big")
		wantCode(t, sum, 0)
		want := strings.Fields(sum.stdout)[0]
		local := jetlettest.FreePort(t)
		f := c.follow("port-forward", "default/shell", local+":8080")
		defer f.stop(t)
		poll.Until(t, 30*time.Second, func() string { return "the forward to listen: " + f.stdout.String() + f.stderr.String() }, func() bool {
			return strings.Contains(f.stdout.String(), "Forwarding from")
		})
		base := "http://127.0.0.1:" + local
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for range 100 {
			wg.Go(func() {
				resp, err := http.Get(base + "/index.html")
				if err != nil {
					errs <- err
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				if err == nil && (resp.StatusCode != 200 || string(b) != "hello\n") {
					err = fmt.Errorf("status %d, body %q", resp.StatusCode, b)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("a connection through the forward: %v", err)
			}
		}
		resp, err := http.Get(base + "/big")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		h := sha256.New()
		n, err := io.Copy(h, resp.Body)
		if err != nil || n != size || hex.EncodeToString(h.Sum(nil)) != want {
			t.Fatalf("the transfer: %d bytes of %d, %v; sha256 %x, want %s", n, size, err, h.Sum(nil), want)
		}
	})

	t.Run("cp of a tree with modes and symlinks, both ways", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "tree")
		mustDo(t, os.MkdirAll(filepath.Join(src, "sub"), 0o750), os.Chmod(filepath.Join(src, "sub"), 0o750),
			os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755), os.Chmod(filepath.Join(src, "run.sh"), 0o755),
			os.WriteFile(filepath.Join(src, "sub", "secret"), []byte("s3cr3t\n"), 0o600), os.Chmod(filepath.Join(src, "sub", "secret"), 0o600),
			os.Symlink("sub/secret", filepath.Join(src, "link")), os.Symlink("/etc/hostname", filepath.Join(src, "abs")))
		wantCode(t, c.run("cp", src, "default/shell:/tmp/copied"), 0)
		res := c.exec("default/shell", "--", "sh", "-c", "cd /tmp/copied && stat -c '%n %a' sub run.sh sub/secret && readlink link && readlink abs && cat link")
		wantCode(t, res, 0)
		if want := "sub 750\nrun.sh 755\nsub/secret 600\nsub/secret\n/etc/hostname\ns3cr3t\n"; res.stdout != want {
			t.Fatalf("the tree in the container:\n%s\nwant:\n%s", res.stdout, want)
		}
		back := filepath.Join(t.TempDir(), "back")
		wantCode(t, c.run("cp", "default/shell:/tmp/copied", back), 0)
		for name, mode := range map[string]os.FileMode{"sub": os.ModeDir | 0o750, "run.sh": 0o755, "sub/secret": 0o600, "link": os.ModeSymlink | 0o777} {
			fi, err := os.Lstat(filepath.Join(back, name))
			if err != nil || fi.Mode() != mode {
				t.Errorf("%s copied back: %v, %v; want mode %v", name, fi.Mode(), err, mode)
			}
		}
		if target, err := os.Readlink(filepath.Join(back, "abs")); err != nil || target != "/etc/hostname" {
			t.Errorf("abs copied back: %q, %v", target, err)
		}
		if b, err := os.ReadFile(filepath.Join(back, "sub", "secret")); err != nil || string(b) != "s3cr3t\n" {
			t.Errorf("sub/secret copied back: %q, %v", b, err)
		}
		// One file alone, out of the container.
		one := filepath.Join(t.TempDir(), "one")
		wantCode(t, c.run("cp", "default/shell:/tmp/copied/run.sh", one), 0)
		if b, err := os.ReadFile(one); err != nil || !bytes.HasPrefix(b, []byte("#!/bin/sh")) {
			t.Errorf("one file copied out: %q, %v", b, err)
		}
	})

	t.Run("a stream of a pod the node does not run is refused", func(t *testing.T) {
		res := c.streamCmd("", "exec", "-i", "default/nosuch", "--", "true")
		if res.code != 125 {
			t.Fatalf("exec -i of a pod nobody runs: %+v", res)
		}
	})
}

// streamCmd runs a command whose arguments end with -- COMMAND: the
// NATS URL goes before them.
func (c *cluster) streamCmd(stdin string, args ...string) cliResult {
	c.t.Helper()
	res := runCLI(c.t.Context(), stdin, append([]string{args[0], "--nats-url", c.url}, args[1:]...)...)
	c.t.Logf("jetlet %s\n--- exit %d; stdout:\n%s--- stderr:\n%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	return res
}

func mustDo(t *testing.T, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
