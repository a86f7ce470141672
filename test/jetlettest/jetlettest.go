// Package jetlettest builds the jetlet binary and runs it as a real process in
// tests, reading its JSON logs to learn the addresses it listens on.
package jetlettest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/jetlet/jetlet/test/cnitest"
	"github.com/jetlet/jetlet/test/gobuild"
)

var jetlet = &gobuild.Command{
	Pkg: "github.com/jetlet/jetlet/cmd/jetlet", Name: "jetlet", Flags: raceFlags,
	Beside: []string{gobuild.Shim.Pkg}, // the embedded runtime's shim, found beside jetlet
}

// Binary builds ./cmd/jetlet once per test process (with -race when the test
// binary has it), and ./cmd/jetlet-shim beside it, and returns jetlet's path.
func Binary(t testing.TB) string { return jetlet.Path(t) }

// bridge is `jetlet bridge`'s own program, built as jetlet is (with -race
// when the tests have it) but only by the tests that run it.
var bridge = &gobuild.Command{Pkg: "github.com/jetlet/jetlet/cmd/jetlet-bridge", Name: "jetlet-bridge", Flags: raceFlags}

// StartBridge runs `jetlet bridge` with args: the jetlet-bridge program
// that jetlet runs for it.
func StartBridge(t testing.TB, args ...string) *Process {
	t.Helper()
	return start(t, bridge.Path(t), nil, args)
}

// Process is a running jetlet.
type Process struct {
	t    testing.TB
	cmd  *exec.Cmd
	done chan struct{}

	mu    sync.Mutex
	lines []map[string]any
	raw   bytes.Buffer
	cond  *sync.Cond
}

// Start runs jetlet with args; the process is killed when the test ends if it
// is still running.
func Start(t testing.TB, args ...string) *Process {
	t.Helper()
	return StartEnv(t, nil, args...)
}

// StartEnv is Start with extra environment variables.
func StartEnv(t testing.TB, env []string, args ...string) *Process {
	t.Helper()
	return start(t, Binary(t), env, args)
}

// start runs the program at path with args and env added to the test's.
func start(t testing.TB, path string, env, args []string) *Process {
	t.Helper()
	p := &Process{t: t, done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	p.cmd = exec.Command(path, args...)
	// Nodes of parallel tests would race for the default port of the
	// registry of the bus (127.0.0.1:5050): each gets a free one unless the
	// test says otherwise (a flag wins over the environment).
	p.cmd.Env = append(append(os.Environ(), "JETLET_IMAGE_REGISTRY_LISTEN=127.0.0.1:0"), env...)
	p.cmd.Env = append(p.cmd.Env, PodNetworkEnv(t, args)...)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(stderr)
	t.Cleanup(func() {
		if !p.Exited() && t.Failed() {
			// Go prints every goroutine on SIGQUIT: the log shows where it hung.
			_ = p.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
			}
		}
		if !p.Exited() {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("jetlet %s logs:\n%s", strings.Join(args, " "), p.Logs())
		}
	})
	return p
}

// podBridges are the pod networks given to data dirs, kept for the test's
// life so that a restart on a data dir finds its pods' bridge.
var podBridges = struct {
	sync.Mutex
	byDir map[string][2]string
}{byDir: map[string][2]string{}}

// PodNetwork is the bridge and the subnet of the embedded runtime's pod
// network on dir (cnitest.Bridge), the same for every start on dir within
// the test: nodes of one test, and of tests of other processes, would
// otherwise share jetlet0 with IP stores of their own and hand out the same
// addresses.
func PodNetwork(t testing.TB, dir string) (bridge, cidr string) {
	podBridges.Lock()
	defer podBridges.Unlock()
	n, ok := podBridges.byDir[dir]
	if !ok {
		n[0], n[1] = cnitest.Bridge(t)
		podBridges.byDir[dir] = n
		t.Cleanup(func() {
			podBridges.Lock()
			delete(podBridges.byDir, dir)
			podBridges.Unlock()
		})
	}
	return n[0], n[1]
}

// PodNetworkEnv gives the embedded runtime of `jetlet run` its data dir's
// PodNetwork, for a test that runs the binary itself (one that is refused
// may have set up the network first). A test that names its network, or
// runs another runtime, gets nothing.
func PodNetworkEnv(t testing.TB, args []string) []string {
	if len(args) == 0 || args[0] != "run" || os.Geteuid() != 0 {
		return nil
	}
	dir := ""
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--pod-bridge"), strings.HasPrefix(a, "--cni-conf-dir"), strings.HasPrefix(a, "--runtime-endpoint"):
			return nil
		case a == "--data-dir" && i+1 < len(args):
			dir = args[i+1]
		case strings.HasPrefix(a, "--data-dir="):
			dir = strings.TrimPrefix(a, "--data-dir=")
		}
	}
	bridge, cidr := PodNetwork(t, dir)
	return []string{"JETLET_POD_BRIDGE=" + bridge, "JETLET_POD_CIDR=" + cidr}
}

func (p *Process) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var line map[string]any
		_ = json.Unmarshal(sc.Bytes(), &line)
		p.mu.Lock()
		p.raw.Write(sc.Bytes())
		p.raw.WriteByte('\n')
		if line != nil {
			p.lines = append(p.lines, line)
		}
		p.cond.Broadcast()
		p.mu.Unlock()
	}
	_ = p.cmd.Wait()
	p.mu.Lock()
	close(p.done)
	p.cond.Broadcast()
	p.mu.Unlock()
}

// Logs returns everything the process logged so far.
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

// WaitLog waits for a log line whose message is msg and returns it; it fails
// the test when the process exits first or the timeout passes.
func (p *Process) WaitLog(msg string, timeout time.Duration) map[string]any {
	p.t.Helper()
	timer := time.AfterFunc(timeout, func() {
		p.mu.Lock()
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(timeout)
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := 0
	for {
		for ; seen < len(p.lines); seen++ {
			if p.lines[seen]["message"] == msg {
				return p.lines[seen]
			}
		}
		select {
		case <-p.done:
			p.t.Fatalf("jetlet exited before logging %q", msg)
		default:
		}
		if !time.Now().Before(deadline) {
			p.t.Fatalf("jetlet did not log %q within %s", msg, timeout)
		}
		p.cond.Wait()
	}
}

// HTTPAddr waits for the HTTP server's address.
func (p *Process) HTTPAddr() string {
	p.t.Helper()
	return p.WaitLog("serving /healthz, /readyz and /metrics", 30*time.Second)["address"].(string)
}

// NATSURL waits for the embedded NATS server's client URL.
func (p *Process) NATSURL() string {
	p.t.Helper()
	return p.WaitLog("embedded NATS server listening", 30*time.Second)["url"].(string)
}

// NATSAuth waits for the embedded NATS server and returns the option that
// authenticates a client to it: the seed jetlet wrote in its data dir.
func (p *Process) NATSAuth() nats.Option {
	p.t.Helper()
	seed, _ := p.WaitLog("embedded NATS server listening", 30*time.Second)["client_seed"].(string)
	opt, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		p.t.Fatal(err)
	}
	return opt
}

// WaitReady polls /readyz until it answers 200. A `jetlet run` of the
// embedded runtime then gets the test images (ImportTestImages): the tests'
// pods run busybox.
func (p *Process) WaitReady(timeout time.Duration) {
	p.t.Helper()
	url := p.HTTPAddr() + "/readyz"
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if dataDir, ok := p.embeddedDataDir(); ok {
					ImportTestImages(p.t, dataDir)
				}
				return
			}
			if !time.Now().Before(deadline) {
				p.t.Fatalf("/readyz still %d after %s: %s", resp.StatusCode, timeout, body)
			}
		} else if !time.Now().Before(deadline) {
			p.t.Fatalf("/readyz: %v", err)
		}
		select {
		case <-p.done:
			p.t.Fatal("jetlet exited while waiting for /readyz")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

// Wait waits for the process to exit and returns its exit code; it fails the
// test when the timeout passes first.
func (p *Process) Wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		p.t.Fatalf("jetlet still running after %s", timeout)
		return -1
	}
}

// Pid is the process's id (for reading its CPU time from /proc).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// embeddedDataDir is the data dir of a `jetlet run` that serves the
// embedded runtime (no --runtime-endpoint); false for any other command.
func (p *Process) embeddedDataDir() (string, bool) {
	args := p.cmd.Args[1:]
	if len(args) == 0 || args[0] != "run" {
		return "", false
	}
	dataDir := "./jetlet-data"
	for i, a := range args {
		name, value, hasValue := strings.Cut(a, "=")
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		switch name {
		case "--runtime-endpoint":
			return "", false
		case "--data-dir":
			dataDir = value
		}
	}
	return dataDir, true
}

// StartNode runs `jetlet run --node node` on the NATS at natsURL with a data
// dir of its own (short: the runtime's socket lives under it), its pods
// removed and the dir deleted when the test ends, and waits for it to be
// ready: a node of a fleet of several on one server. args are more flags.
func StartNode(t testing.TB, natsURL, node string, args ...string) *Process {
	t.Helper()
	dir, err := os.MkdirTemp("", "jnode")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	RemovePodsOnCleanup(t, dir)
	p := Start(t, append([]string{"run", "--node", node, "--data-dir", dir, "--nats-url", natsURL, "--http-listen", "127.0.0.1:0"}, args...)...)
	p.WaitReady(time.Minute)
	return p
}
