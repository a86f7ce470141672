// Package natscluster runs a JetStream cluster of nats-server processes for
// tests: real processes, so that SIGKILL and SIGSTOP are what they are in
// production, started from a nats-server configuration file (the one in
// deploy/) with per-server ports, names and store directories given on the
// command line.
package natscluster

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/poll"
)

var natsServer = &gobuild.Command{Pkg: "github.com/nats-io/nats-server/v2", Name: "nats-server"}

// Binary builds nats-server from the module's own dependency (the version in
// go.mod, no download) once per test process and returns its path.
func Binary(t testing.TB) string { return natsServer.Path(t) }

// storeDir matches the JetStream store_dir line of a configuration file.
var storeDir = regexp.MustCompile(`(?m)^(\s*store_dir:\s*).*$`)

// Config says how to start the cluster.
type Config struct {
	// File is the nats-server configuration every server is started with. It
	// is copied, with Includes beside it, into a temporary directory, once per
	// server with the server's own JetStream store_dir.
	File string
	// Includes are files written beside the copy of File (the files it
	// includes), by name.
	Includes map[string]string
	// RouteUser and RoutePassword authenticate the routes (the cluster
	// block's authorization); empty for none.
	RouteUser, RoutePassword string
	// Size is the number of servers (3 when zero).
	Size int
}

// Cluster is a running cluster. Its methods are for the test goroutine.
type Cluster struct {
	t       testing.TB
	cfg     Config
	Servers []*Server
	// links[i][j] carries the routes server i solicits to server j.
	links [][]*link
}

// Server is one nats-server of the cluster.
type Server struct {
	Name    string
	Port    int // client port
	cluster int
	monitor int
	conf    string // the configuration file with this server's store_dir
	log     string
	routes  []string
	cmd     *exec.Cmd
	done    chan struct{}
	frozen  bool
}

// URL is the server's client URL.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.Port) }

// Start starts the cluster, waits until every server is healthy (JetStream
// meta leader elected, every server current) and stops it when the test ends.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if cfg.Size == 0 {
		cfg.Size = 3
	}
	bin := Binary(t)
	dir := t.TempDir()
	text, err := os.ReadFile(cfg.File)
	if err != nil {
		t.Fatal(err)
	}
	if !storeDir.Match(text) {
		t.Fatalf("%s sets no jetstream store_dir", cfg.File)
	}
	c := &Cluster{t: t, cfg: cfg}
	for name, content := range cfg.Includes {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := range cfg.Size {
		s := &Server{
			Name:    fmt.Sprintf("nats%d", i+1),
			Port:    freePort(t),
			cluster: freePort(t),
			monitor: freePort(t),
			conf:    filepath.Join(dir, fmt.Sprintf("nats%d.conf", i+1)),
			log:     filepath.Join(dir, fmt.Sprintf("nats%d.log", i+1)),
		}
		// nats-server refuses -sd beside a store_dir: each server gets a
		// copy of the file with its own.
		own := storeDir.ReplaceAll(text, []byte(fmt.Sprintf("${1}%q", filepath.Join(dir, fmt.Sprintf("store%d", i+1)))))
		if err := os.WriteFile(s.conf, own, 0o600); err != nil {
			t.Fatal(err)
		}
		check := exec.Command(bin, "-t", "-c", s.conf)
		check.Env = append(os.Environ(), "NATS_SERVER_NAME="+s.Name)
		if out, err := check.CombinedOutput(); err != nil {
			t.Fatalf("nats-server does not accept %s: %v\n%s", cfg.File, err, out)
		}
		c.Servers = append(c.Servers, s)
	}
	c.links = make([][]*link, cfg.Size)
	for i, s := range c.Servers {
		c.links[i] = make([]*link, cfg.Size)
		for j, peer := range c.Servers {
			if i == j {
				continue
			}
			l, err := newLink(fmt.Sprintf("127.0.0.1:%d", peer.cluster))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(l.close)
			c.links[i][j] = l
			s.routes = append(s.routes, c.routeURL(l.addr()))
		}
	}
	t.Cleanup(c.stopAll)
	for i := range c.Servers {
		c.start(i)
	}
	c.waitAllStarted(60 * time.Second)
	return c
}

// startAttempts bounds the starts of one server at cluster start-up.
const startAttempts = 5

// waitAllStarted waits until every server runs and is healthy. A server
// that exits meanwhile (a port freePort chose was taken before the server
// bound it: another process's ephemeral port) gets new ports and is started
// again.
func (c *Cluster) waitAllStarted(timeout time.Duration) {
	c.t.Helper()
	starts := make([]int, len(c.Servers))
	var last string
	poll.Until(c.t, timeout, func() string { return "every server started and healthy; last: " + last }, func() bool {
		healthy := true
		for i, s := range c.Servers {
			if !c.Running(i) {
				if starts[i]++; starts[i] >= startAttempts {
					c.t.Fatalf("%s exited at start-up %d times; see its log", s.Name, starts[i])
				}
				c.t.Logf("%s exited at start-up (a port taken?); starting it on new ports", s.Name)
				c.movePorts(i)
				c.start(i)
				healthy = false
				continue
			}
			if err := s.healthy(); err != nil {
				last = s.Name + ": " + err.Error()
				healthy = false
			}
		}
		return healthy
	})
}

// movePorts gives server i new client, monitoring and cluster ports, and
// points the links to it at the new cluster port.
func (c *Cluster) movePorts(i int) {
	s := c.Servers[i]
	s.Port, s.monitor, s.cluster = freePort(c.t), freePort(c.t), freePort(c.t)
	for j := range c.Servers {
		if l := c.links[j][i]; l != nil {
			l.retarget(fmt.Sprintf("127.0.0.1:%d", s.cluster))
		}
	}
}

func (c *Cluster) routeURL(addr string) string {
	u := url.URL{Scheme: "nats", Host: addr}
	if c.cfg.RouteUser != "" {
		u.User = url.UserPassword(c.cfg.RouteUser, c.cfg.RoutePassword)
	}
	return u.String()
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// URLs is every server's client URL, comma-separated, as --nats-url takes it.
func (c *Cluster) URLs() string {
	var urls []string
	for _, s := range c.Servers {
		urls = append(urls, s.URL())
	}
	return strings.Join(urls, ",")
}

// Index returns the index of the server called name, or -1.
func (c *Cluster) Index(name string) int {
	for i, s := range c.Servers {
		if s.Name == name {
			return i
		}
	}
	return -1
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	s := c.Servers[i]
	logFile, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logFile.Close()
	// Gossiped route URLs would let servers bypass the links; advertising
	// a closed port keeps every route on its link.
	blackhole := freePort(c.t)
	// The server's name from the environment, as deploy/'s unit gives it
	// (server_name: $NATS_SERVER_NAME): a reload keeps it.
	s.cmd = exec.Command(Binary(c.t), "-c", s.conf, "-a", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-m", strconv.Itoa(s.monitor),
		"--cluster", c.routeURL(fmt.Sprintf("127.0.0.1:%d", s.cluster)),
		"--cluster_advertise", fmt.Sprintf("127.0.0.1:%d", blackhole),
		"--routes", strings.Join(s.routes, ","))
	s.cmd.Env = append(os.Environ(), "NATS_SERVER_NAME="+s.Name)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	s.done = make(chan struct{})
	s.frozen = false
	go func(cmd *exec.Cmd, done chan struct{}) {
		_ = cmd.Wait()
		close(done)
	}(s.cmd, s.done)
}

// Running reports whether server i's process is alive.
func (c *Cluster) Running(i int) bool {
	select {
	case <-c.Servers[i].done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL to server i and waits for it to die.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	c.signal(i, syscall.SIGKILL)
	c.waitExit(i)
}

// Stop stops server i as an upgrade would (SIGTERM) and waits for it to exit.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	c.signal(i, syscall.SIGTERM)
	c.waitExit(i)
}

// Restart starts server i again on its ports and store, after Kill or Stop.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.Running(i) {
		c.t.Fatalf("%s is still running", c.Servers[i].Name)
	}
	c.start(i)
}

// Reload has server i read its configuration again (SIGHUP, what the
// unit's reload sends), and returns what it logged of it: that it reloaded,
// or why it failed to.
func (c *Cluster) Reload(i int) string {
	c.t.Helper()
	s := c.Servers[i]
	before, _ := os.ReadFile(s.log)
	c.signal(i, syscall.SIGHUP)
	var said string
	poll.Until(c.t, 30*time.Second, poll.Msg(s.Name+" to log its reload"), func() bool {
		data, _ := os.ReadFile(s.log)
		for _, line := range strings.Split(string(data[min(len(before), len(data)):]), "\n") {
			if strings.Contains(line, "Reloaded server configuration") || strings.Contains(line, "Failed to reload server configuration") {
				said = line
				return true
			}
		}
		return false
	})
	return said
}

// Freeze stops server i's process (SIGSTOP) without closing its sockets;
// Thaw resumes it.
func (c *Cluster) Freeze(i int) {
	c.t.Helper()
	c.signal(i, syscall.SIGSTOP)
	c.Servers[i].frozen = true
}

func (c *Cluster) Thaw(i int) {
	c.t.Helper()
	c.signal(i, syscall.SIGCONT)
	c.Servers[i].frozen = false
}

// Cut partitions server i from the others: every route between them is
// dropped and refused, in both directions. Its clients stay connected.
func (c *Cluster) Cut(i int) { c.setCut(i, true) }

// Heal lets server i's routes through again.
func (c *Cluster) Heal(i int) { c.setCut(i, false) }

func (c *Cluster) setCut(i int, cut bool) {
	for j := range c.Servers {
		if j != i {
			c.links[i][j].setCut(cut)
			c.links[j][i].setCut(cut)
		}
	}
}

func (c *Cluster) signal(i int, sig syscall.Signal) {
	c.t.Helper()
	if err := c.Servers[i].cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %s to %s: %v", sig, c.Servers[i].Name, err)
	}
}

func (c *Cluster) waitExit(i int) {
	c.t.Helper()
	select {
	case <-c.Servers[i].done:
	case <-time.After(30 * time.Second):
		c.t.Fatalf("%s still running 30s after it was told to stop", c.Servers[i].Name)
	}
}

// WaitHealthy waits until every running server answers /healthz with 200:
// it is connected to the cluster and its JetStream assets are current.
func (c *Cluster) WaitHealthy(timeout time.Duration) {
	c.t.Helper()
	var last string
	poll.Until(c.t, timeout, func() string { return "a healthy cluster; last: " + last }, func() bool {
		for i, s := range c.Servers {
			if !c.Running(i) {
				continue
			}
			if err := s.healthy(); err != nil {
				last = s.Name + ": " + err.Error()
				return false
			}
		}
		return true
	})
}

func (s *Server) healthy() error {
	client := http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", s.monitor))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		return fmt.Errorf("%d %s", resp.StatusCode, strings.TrimSpace(body.String()))
	}
	return nil
}

// stopAll kills every server at the end of the test and, if it failed,
// logs the tail of each server's log.
func (c *Cluster) stopAll() {
	for i, s := range c.Servers {
		if s.cmd == nil {
			continue
		}
		if s.frozen {
			_ = s.cmd.Process.Signal(syscall.SIGCONT)
		}
		if c.Running(i) {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		if c.t.Failed() {
			data, _ := os.ReadFile(s.log)
			lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			c.t.Logf("%s log (last 60 lines):\n%s", s.Name, strings.Join(lines[max(0, len(lines)-60):], "\n"))
		}
	}
}
