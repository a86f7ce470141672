package embedded

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// echoServerEnv, when set, makes the test binary the tiny TCP server of the
// port-forward tests (TestPortForwardEchoServer): it listens on a free port
// of 127.0.0.1, writes the port to the file the variable names, and answers
// each line with "echo: " and the line.
const echoServerEnv = "JETLET_TEST_ECHO_PORT_FILE"

func TestPortForwardEchoServer(t *testing.T) {
	portFile := os.Getenv(echoServerEnv)
	if portFile == "" {
		t.Skip("the server of TestPortForward, run in a container")
	}
	lis, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(portFile+".tmp", []byte(port), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(portFile+".tmp", portFile); err != nil {
		t.Fatal(err)
	}
	for {
		conn, err := lis.Accept()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer conn.Close()
			lines := bufio.NewScanner(conn)
			for lines.Scan() {
				fmt.Fprintf(conn, "echo: %s\n", lines.Text())
			}
		}()
	}
}

// runEchoServer starts the echo server in a container of sb and returns the
// port it listens on in the pod.
func (h *harness) runEchoServer(sb string, sbCfg *runtimeapi.PodSandboxConfig) int {
	h.t.Helper()
	self, err := os.Executable()
	if err != nil {
		h.t.Fatal(err)
	}
	// The container sees the shared directory, not the test binary's /tmp.
	bin := filepath.Join(h.shared, "echo-server")
	if err := os.Link(self, bin); err != nil {
		data, err := os.ReadFile(self)
		if err == nil {
			err = os.WriteFile(bin, data, 0o755)
		}
		if err != nil {
			h.t.Fatal(err)
		}
	}
	portFile := filepath.Join(h.shared, "echo-port")
	cfg := containerConfig("echo", nil, bin, "-test.run=^TestPortForwardEchoServer$")
	cfg.Envs = []*runtimeapi.KeyValue{{Key: echoServerEnv, Value: []byte(portFile)}}
	cfg.Mounts = append(cfg.Mounts, hostLibraries()...)
	h.startC(h.create(sb, sbCfg, cfg))
	var port int
	eventually(h.t, "the echo server's port", func() bool {
		data, err := os.ReadFile(portFile)
		port, _ = strconv.Atoi(string(data))
		return err == nil
	})
	return port
}

// forward runs client-go's port forwarder, as kubectl and critest use it, to
// port of sandbox sb, and returns the local address it listens on.
func (h *harness) forward(t *testing.T, sb string, port int) string {
	t.Helper()
	resp, err := h.rs.PortForward(ctxT(t), &runtimeapi.PortForwardRequest{PodSandboxId: sb, Port: []int32{int32(port)}})
	if err != nil {
		t.Fatalf("PortForward: %v", err)
	}
	u, err := url.Parse(resp.GetUrl())
	if err != nil {
		t.Fatal(err)
	}
	tr, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: tr}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddressesForStreaming(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	forwarding := make(chan error, 1)
	go func() { forwarding <- pf.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		if err := <-forwarding; err != nil {
			t.Errorf("ForwardPorts: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-forwarding:
		t.Fatalf("ForwardPorts: %v", err)
	}
	ports, err := pf.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local)))
}

func TestPortForward(t *testing.T) {
	for _, tc := range []struct {
		name    string
		harness func(t *testing.T) *harness
	}{
		{"host network", func(t *testing.T) *harness { return newHarness(t) }},
		{"pod network through CNI", func(t *testing.T) *harness { h, _ := cniHarness(t); return h }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.harness(t)
			sb, sbCfg := h.pod("p", nil)
			port := h.runEchoServer(sb, sbCfg)
			local := h.forward(t, sb, port)
			for _, msg := range []string{"ping", "pong"} {
				conn, err := net.Dial("tcp", local)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(conn, "%s\n", msg)
				line, err := bufio.NewReader(conn).ReadString('\n')
				conn.Close()
				if err != nil || strings.TrimSuffix(line, "\n") != "echo: "+msg {
					t.Fatalf("got %q, %v", line, err)
				}
			}
		})
	}
}
