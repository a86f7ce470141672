package client

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/syncbuf"

	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// commandPod is a pod of one container "app" that runs script with
// restartPolicy Never. Each of dirs is an emptyDir volume mounted there: a
// place the container keeps files across its restarts. The test reaches the
// container's files with jetlet exec, as a user would: its pods mount
// nothing of the host, which the node's default Pod Security level refuses.
func commandPod(name, script string, dirs ...string) string {
	var volumes, mounts strings.Builder
	for i, dir := range dirs {
		fmt.Fprintf(&volumes, "  - name: keep-%d\n    emptyDir: {}\n", i)
		fmt.Fprintf(&mounts, "    - name: keep-%d\n      mountPath: %q\n", i, dir)
	}
	pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", %q]
`, name, script)
	if len(dirs) > 0 {
		pod += "    volumeMounts:\n" + mounts.String() + "  volumes:\n" + volumes.String()
	}
	return pod
}

// TestLogsAndExecAgainstJetletRun runs jetlet logs and jetlet exec against a
// real `jetlet run` (embedded NATS, embedded process runtime).
func TestLogsAndExecAgainstJetletRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jetlet run")
	}
	examples, err := filepath.Abs(examples)
	if err != nil {
		t.Fatal(err)
	}
	bin := jetlettest.Binary(t)
	p, c := startJetletRun(t, "web", "crashonce", "ticker", "big", "crashloop")
	dir, err := os.Getwd() // jetlet's, whose data dir authenticates the commands
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, c.run("apply", "-f", filepath.Join(examples, "web.yaml"), "--wait"), 0)

	t.Run("logs -f follows a container and ends when it exits", func(t *testing.T) {
		// The container prints a line a second, then waits for the test
		// to have seen them through the follow before it exits.
		wantCode(t, c.runIn(commandPod("ticker", "for i in 1 2 3; do echo tick $i; sleep 1; done; echo waiting >&2; "+
			"while [ ! -e /tmp/seen ]; do sleep 0.1; done; echo bye"), "apply", "-f", "-", "--wait"), 0)
		f := c.follow("logs", "default/ticker", "-f")
		poll.Until(t, 30*time.Second, func() string { return "the follow to print the ticks; have " + f.stdout.String() }, func() bool {
			return f.stdout.String() == "tick 1\ntick 2\ntick 3\nwaiting\n"
		})
		wantCode(t, c.exec("default/ticker", "--", "touch", "/tmp/seen"), 0)
		select {
		case code := <-f.done:
			if code != 0 || f.stdout.String() != "tick 1\ntick 2\ntick 3\nwaiting\nbye\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, f.stdout.String(), f.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("logs -f did not end when the container exited; stdout %q", f.stdout.String())
		}
		res := c.run("logs", "default/ticker", "--tail", "2", "--timestamps")
		wantCode(t, res, 0)
		if !regexp.MustCompile(`^\S+Z waiting\n\S+Z bye\n$`).MatchString(res.stdout) {
			t.Errorf("logs --tail 2 --timestamps: %q", res.stdout)
		}
	})

	t.Run("logs --previous shows the crashed instance's output", func(t *testing.T) {
		// It crashes once, then runs: its previous instance is the crashed
		// one, which the container GC keeps (the newest dead instance).
		pod := strings.Replace(commandPod("crashonce", "if [ -e /keep/crashed ]; then echo second; exec sleep 3600; fi; "+
			"touch /keep/crashed; echo first; echo crashing >&2; exit 7", "/keep"), "restartPolicy: Never", "restartPolicy: Always", 1)
		wantCode(t, c.runIn(pod, "apply", "-f", "-", "--wait"), 0)
		var res cliResult
		poll.Until(t, 60*time.Second, func() string { return "the second instance of crashonce; last: " + res.stdout + res.stderr }, func() bool {
			res = runCLI(t.Context(), "", "logs", "default/crashonce", "--nats-url", c.url)
			return res.code == 0 && res.stdout == "second\n"
		})
		res = c.run("logs", "default/crashonce", "--previous")
		wantCode(t, res, 0)
		// Its stdout and stderr lines, in the order the runtime wrote them.
		lines := strings.Split(strings.TrimSuffix(res.stdout, "\n"), "\n")
		slices.Sort(lines)
		if !slices.Equal(lines, []string{"crashing", "first"}) {
			t.Fatalf("logs --previous: %q", res.stdout)
		}
	})

	t.Run("logs --previous of a crash loop in back-off is its last crash", func(t *testing.T) {
		// As kubelet: while a container waits out its back-off, its last
		// termination is its newest instance, which the container GC keeps
		// (the older ones it removes); logs shows it too. Each instance
		// says which attempt it is.
		pod := strings.Replace(commandPod("crashloop", "n=$(cat /keep/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /keep/n; "+
			"echo attempt $n; exit 1", "/keep"), "restartPolicy: Never", "restartPolicy: Always", 1)
		file := filepath.Join(t.TempDir(), "crashloop.yaml")
		if err := os.WriteFile(file, []byte(pod), 0o600); err != nil {
			t.Fatal(err)
		}
		wantCode(t, c.run("apply", "-f", file, "--wait"), 0)
		c.waitBackOff(file, 5*time.Second)
		last, previous := c.run("logs", "default/crashloop"), c.run("logs", "default/crashloop", "--previous")
		wantCode(t, previous, 0)
		if previous.stdout != last.stdout || !strings.HasPrefix(previous.stdout, "attempt ") {
			t.Errorf("logs --previous %q, logs %q: want both the last attempt's", previous.stdout, last.stdout)
		}
	})

	t.Run("exec returns the command's output and exit code", func(t *testing.T) {
		res := c.exec("default/web", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
		if res.code != 3 || res.stdout != "out\n" || res.stderr != "err\n" {
			t.Fatalf("exec: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
		}
		wantCode(t, c.exec("default/web", "-c", "app", "--", "true"), 0)
		res = c.exec("default/web", "-c", "nope", "--", "true")
		wantCode(t, res, execFailed)
		wantContains(t, "exec -c nope", res.stderr, "node n1: pod default/web has no container nope")
		res = c.exec("default/web", "--timeout", "1s", "--", "sleep", "10")
		wantCode(t, res, execTimedOut)
		wantCode(t, c.exec("default/web"), execFailed)
	})

	t.Run("a large log streams completely and in order", func(t *testing.T) {
		const lines = 300_000 // 100 bytes a line: about 29 MiB
		wantCode(t, c.runIn(commandPod("big", fmt.Sprintf("seq 1 %d | awk -v x=%s '{printf \"%%08d %%s\\n\", $1, x}'", lines, strings.Repeat("x", 90))), "apply", "-f", "-", "--wait"), 0)
		poll.Until(t, 60*time.Second, poll.Msg("big to complete"), func() bool {
			return regexp.MustCompile(`(?m)^default\s+big\s+0/1\s+Completed\s`).MatchString(runCLI(t.Context(), "", "get", "pods", "--nats-url", c.url).stdout)
		})
		check := &lineCheck{line: func(i int) string { return fmt.Sprintf("%08d %s", i+1, strings.Repeat("x", 90)) }}
		var stderr bytes.Buffer
		if code := runCLIWith(t.Context(), strings.NewReader(""), check, &stderr, "logs", "default/big", "--nats-url", c.url); code != 0 || check.err != nil || check.n != lines {
			t.Fatalf("exit %d (%s): %d of %d lines, %d bytes; %v", code, stderr.String(), check.n, lines, check.bytes, check.err)
		}
		t.Logf("jetlet logs default/big: %d lines, %d bytes, in order", check.n, check.bytes)
	})

	t.Run("a follow whose client disappears is stopped on the node", func(t *testing.T) {
		metrics := p.HTTPAddr() + "/metrics"
		cmd := exec.Command(bin, "logs", "default/web", "-f", "--nats-url", c.url)
		cmd.Dir = dir
		out := &syncbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 30*time.Second, func() string { return "the follow to print; have " + out.String() }, func() bool {
			return out.Len() > 0
		})
		if got := streams(t, metrics); got != "1" {
			t.Fatalf("jetlet_node_service_streams %s while following, want 1", got)
		}
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		poll.Until(t, 60*time.Second, poll.Msg("the node to stop the stream (jetlet_node_service_streams 0)"), func() bool {
			return streams(t, metrics) == "0"
		})
	})
}

// streams is the value of jetlet_node_service_streams.
func streams(t *testing.T, metrics string) string {
	t.Helper()
	resp, err := http.Get(metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^jetlet_node_service_streams (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatal("no jetlet_node_service_streams in /metrics")
	}
	return string(m[1])
}

// lineCheck checks the lines written to it against line(0), line(1), ...
// keeping only an unfinished last line.
type lineCheck struct {
	line    func(i int) string
	n       int
	bytes   int64
	partial []byte
	err     error
}

func (c *lineCheck) Write(p []byte) (int, error) {
	c.bytes += int64(len(p))
	c.partial = append(c.partial, p...)
	for c.err == nil {
		l, rest, ok := bytes.Cut(c.partial, []byte{'\n'})
		if !ok {
			break
		}
		if want := c.line(c.n); string(l) != want {
			c.err = fmt.Errorf("line %d is %.30q, want %.30q", c.n, l, want)
		}
		c.n++
		c.partial = append(c.partial[:0], rest...)
	}
	return len(p), nil
}

// exec runs jetlet exec with the cluster's URL before the command's "--".
func (c *cluster) exec(args ...string) cliResult {
	c.t.Helper()
	res := runCLI(c.t.Context(), "", append([]string{"exec", "--nats-url", c.url}, args...)...)
	c.t.Logf("jetlet exec %s\n--- exit %d; stdout:\n%s--- stderr:\n%s", strings.Join(args, " "), res.code, res.stdout, res.stderr)
	return res
}
