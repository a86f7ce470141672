package escapes_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// TestHostAbstractSocket is containerd's CVE-2020-15257: abstract unix
// sockets belong to a network namespace, not to a file system, so a pod in
// the host's network namespace reaches the host's (containerd-shim's API
// was one). The test listens on @jetlet-escape-<random> on the host; the
// pod must not connect.
func TestHostAbstractSocket(t *testing.T) {
	n := startNode(t)
	n.importTool()
	name := "jetlet-escape-" + randomHex(t, 8)
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			_, _ = c.Write([]byte("the host's socket"))
			c.Close()
		}
	}()
	n.apply("abstract", `"restartPolicy":"Never","containers":[`+container("app", toolImage, "/bin/escapetool abstract "+name+"; echo "+done)+`]`)
	out, refusal := n.attempt("abstract", "app", 90*time.Second)
	report(t, "abstract", out, refusal)
	ran(t, "abstract", refusal)
	if strings.Contains(out, "connected") || accepted.Load() > 0 {
		t.Errorf("ESCAPE: the pod connected to the host's abstract socket @%s (%d accepted): %s", name, accepted.Load(), strings.TrimSpace(out))
	}
}

// TestSniffTheBus: a pod opens an AF_PACKET socket on every interface it
// sees and captures while the test publishes, to jetlet's NATS over
// loopback, an intent whose environment holds a secret value; the value
// must not be in the capture. Nor may the pod reach jetlet's NATS port,
// its HTTP port (/metrics) or a TCP listener of the test on 127.0.0.1.
func TestSniffTheBus(t *testing.T) {
	n := startNode(t)
	n.importTool()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	natsAddr := strings.TrimPrefix(n.proc.NATSURL(), "nats://")
	httpAddr := strings.TrimPrefix(n.proc.HTTPAddr(), "http://")
	targets := []string{natsAddr, httpAddr, l.Addr().String()}
	script := fmt.Sprintf(`/bin/escapetool dial %s; /bin/escapetool sniff /ed/capture /ed/stop 90s; echo %s`, strings.Join(targets, " "), done)
	n.apply("sniff", `"restartPolicy":"Never","volumes":[{"name":"ed","emptyDir":{}}],
	  "containers":[`+container("app", toolImage, script, `"volumeMounts":[{"name":"ed","mountPath":"/ed"}]`)+`]`)
	var out string
	poll.Until(t, 90*time.Second, func() string { return "the pod to start capturing or fail to; output:\n" + out }, func() bool {
		out = n.logs("sniff", "app")
		return strings.Contains(out, "sniff: ")
	})
	canary := "jetlet-canary-env-" + randomHex(t, 16)
	// Refused at admission (hostPID at baseline): the intent crosses
	// loopback twice (published, then delivered to jetlet), and no pod
	// starts.
	for i := range 3 {
		uid := fmt.Sprintf("canary-%d", i)
		seq := n.apply(uid, `"hostPID":true,"restartPolicy":"Never","containers":[`+container("app", "", "true",
			fmt.Sprintf(`"env":[{"name":"CANARY","value":%q}]`, canary))+`]`)
		n.result(uid, seq)
	}
	if err := os.WriteFile(filepath.Join(n.emptyDir("sniff", "ed"), "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, refusal := n.attempt("sniff", "app", 120*time.Second)
	report(t, "sniff", out, refusal)
	for _, target := range targets {
		if line, ok := lineWith([]string{out}, "dial "+target+": connected"); ok {
			t.Errorf("ESCAPE: the pod reached the host's 127.0.0.1 listener: %s", line)
		}
	}
	capture, _ := os.ReadFile(filepath.Join(n.emptyDir("sniff", "ed"), "capture"))
	t.Logf("capture: %d bytes", len(capture))
	if i := bytes.Index(capture, []byte(canary)); i >= 0 {
		t.Errorf("ESCAPE: the pod captured the intent's secret env value off the host's loopback: %q",
			capture[max(0, i-80):min(len(capture), i+len(canary)+20)])
	}
}

// TestHostPort: a pod that binds port 81 must not take the host's port
// 81 (nothing answers on the host's addresses), and a pod asking for a
// hostPort is refused at the baseline level.
func TestHostPort(t *testing.T) {
	addrs := hostAddrs(t, "81")
	for _, a := range addrs {
		if answersLocally(t, a, time.Second) {
			t.Fatalf("something on this host listens on %s already: the test cannot tell the pod's from it", a)
		}
	}
	n := startNode(t)
	script := `mkdir -p /var/www; httpd -f -p 81 -h /var/www & for i in $(seq 100); do netstat -ltn | grep -q ':81 ' && break; usleep 50000; done
	  echo "listening: $(netstat -ltn | grep ':81 ')"; echo ` + done + `; wait`
	n.apply("port81", `"restartPolicy":"Never","containers":[`+container("app", "", script)+`]`)
	out, refusal := n.attempt("port81", "app", 90*time.Second)
	report(t, "port81", out, refusal)
	if !strings.Contains(out, "listening: tcp") {
		t.Fatalf("the pod did not listen on its port 81, so the row tells nothing: %s", out)
	}
	for _, a := range addrs {
		if answersLocally(t, a, 2*time.Second) {
			t.Errorf("ESCAPE: the pod's port 81 is the host's: %s answers", a)
		}
	}

	seq := n.apply("hostport", `"restartPolicy":"Never","containers":[`+container("app", "", "sleep 3600",
		`"ports":[{"containerPort":8081,"hostPort":8081}]`)+`]`)
	if r := n.result("hostport", seq); r.Outcome != schemas.OutcomeRejected || r.Reason != "PodSecurity" {
		t.Errorf("ESCAPE: a pod with a hostPort at baseline: %s %s %q, want Rejected PodSecurity", r.Outcome, r.Reason, r.Error)
	}
}

// answersLocally reports whether something answers on addr, host:port of
// an address of this host's. Other tests' bridges, and their addresses,
// come and go while this one runs; a connection to an address gone leaves
// the host by its default route, where something upstream may answer (a
// proxy that accepts every connection): addr must be the host's both
// before and after it answers.
func answersLocally(t *testing.T, addr string, timeout time.Duration) bool {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	local := func() bool { return slices.Contains(hostAddrs(t, port), addr) }
	if !local() {
		return false
	}
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return false
	}
	c.Close()
	return local()
}

// hostAddrs is host:port for each IPv4 address of the host.
func hostAddrs(t *testing.T, port string) []string {
	t.Helper()
	ifAddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range ifAddrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil {
			out = append(out, net.JoinHostPort(ip.IP.String(), port))
		}
	}
	return out
}
