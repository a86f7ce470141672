package bridge_test

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/jetlet/jetlet/test/kubetest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/syncbuf"
)

// kubectl starts kubectl with args in the background, ended with the test.
func (f *fleet) kubectl(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	return exec.Command(kubetest.Binary(t), append([]string{"kubectl", "--kubeconfig", f.cp.Kubeconfig}, args...)...)
}

// kubectl logs, exec (with an exit code, and -it through a terminal),
// attach, port-forward and top reach a pod on a jetlet node: kube-apiserver calls
// the bridge's kubelet API (TLS, its client certificate checked), which
// carries each call to the node over the bus; for top, metrics-server
// scrapes that API and kube-apiserver serves what it kept.
func TestKubectlReachesAPodThroughTheBridge(t *testing.T) {
	t.Parallel()
	f := startFleetOn(t, kubetest.Start(t, kubetest.WithMetricsServer), "n1")
	ctx := t.Context()
	f.schedulable(t, "n1")
	spec := sleeper()
	spec.Containers[0].Command = []string{"sh", "-c", "echo hello-from-jetlet; mkdir -p /www; echo port-forwarded > /www/index.html; exec httpd -f -p 8080 -h /www"}
	f.runPod(t, "web", spec)

	t.Run("logs", func(t *testing.T) {
		var out string
		var err error
		poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("kubectl logs web: %q %v", out, err) }, func() bool {
			out, err = f.cp.Kubectl(ctx, "logs", "web")
			return err == nil && strings.Contains(out, "hello-from-jetlet")
		})
	})

	t.Run("exec", func(t *testing.T) {
		out, err := f.cp.Kubectl(ctx, "exec", "web", "--", "sh", "-c", "echo $((6*7))")
		if err != nil || strings.TrimSpace(out) != "42" {
			t.Errorf("kubectl exec: %q, %v; want 42", out, err)
		}
		_, err = f.cp.Kubectl(ctx, "exec", "web", "--", "sh", "-c", "exit 3")
		if err == nil || !strings.Contains(err.Error(), "exit code 3") {
			t.Errorf("kubectl exec of exit 3: %v, want its exit code", err)
		}
	})

	t.Run("exec -it through a terminal", func(t *testing.T) {
		cmd := f.kubectl(t, "exec", "-it", "web", "--", "sh")
		term, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: 80})
		if err != nil {
			t.Fatal(err)
		}
		var out syncbuf.Buffer
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = io.Copy(&out, term) // ends with EIO once kubectl is gone
		}()
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			term.Close()
			<-done
		})
		if _, err := term.Write([]byte("stty size; tty; echo $((40+2))\n")); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("the terminal's size, a tty and 42 (shows %q)", out.String()) }, func() bool {
			s := out.String()
			return strings.Contains(s, "24 80") && regexp.MustCompile(`/dev/pts/\d+`).MatchString(s) && strings.Contains(s, "\n42")
		})
		if _, err := term.Write([]byte("exit 5\n")); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); cmd.ProcessState.ExitCode() != 5 {
			t.Errorf("kubectl exec -it ended %v, want exit status 5 (the shell's)", err)
		}
	})

	// The Summary API and the resource metrics, as metrics-server scrapes
	// them: straight from the node's kubelet API (its own port), with a
	// client certificate of the cluster's CA whose user may get
	// nodes/stats (kube-apiserver's node proxy refuses a loopback address).
	t.Run("stats and resource metrics", func(t *testing.T) {
		n, err := f.cp.Client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		base := fmt.Sprintf("https://127.0.0.1:%d", n.Status.DaemonEndpoints.KubeletEndpoint.Port)
		get := func(user, path string) (int, string, error) {
			tlsConfig := &tls.Config{InsecureSkipVerify: true} // self-signed, as kube-apiserver takes it
			if user != "" {
				pki := filepath.Join(f.cp.Dir, "pki", user)
				cert, err := tls.LoadX509KeyPair(pki+".crt", pki+".key")
				if err != nil {
					t.Fatal(err)
				}
				tlsConfig.Certificates = []tls.Certificate{cert}
			}
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 30 * time.Second}
			resp, err := c.Get(base + path)
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body), nil
		}
		var summary statsv1alpha1.Summary
		var code int
		var raw string
		poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("a Summary of n1 with pod web: %d %.500q %v", code, raw, err) }, func() bool {
			code, raw, err = get("kube-apiserver-kubelet-client", "/stats/summary")
			if err != nil || code != http.StatusOK || json.Unmarshal([]byte(raw), &summary) != nil {
				return false
			}
			return summary.Node.NodeName == "n1" && slices.ContainsFunc(summary.Pods, func(p statsv1alpha1.PodStats) bool { return p.PodRef.Name == "web" })
		})
		code, metrics, err := get("kube-apiserver-kubelet-client", "/metrics/resource")
		if err != nil || code != http.StatusOK {
			t.Fatalf("/metrics/resource: %d %v", code, err)
		}
		for _, want := range []string{"node_memory_working_set_bytes ", `container_memory_working_set_bytes{container="app",namespace="default",pod="web"} `} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics/resource has no %q:\n%s", want, metrics)
			}
		}
		// Who may not: no certificate at all, and a user without nodes/stats.
		if _, _, err := get("", "/stats/summary"); err == nil {
			t.Error("/stats/summary answered a client without a certificate")
		}
		if code, body, err := get("kube-scheduler", "/stats/summary"); err != nil || code != http.StatusForbidden {
			t.Errorf("/stats/summary for system:kube-scheduler: %d %q %v, want 403", code, body, err)
		}
	})

	// metrics-server has a rate of CPU once it has scraped twice, 10 s apart.
	t.Run("top", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want *regexp.Regexp
		}{
			{[]string{"top", "pod", "web", "--no-headers"}, regexp.MustCompile(`^web\s+\d+m\s+\d+Mi$`)},
			{[]string{"top", "node", "n1", "--no-headers"}, regexp.MustCompile(`^n1\s+\d+m\s+\d+%\s+\d+Mi\s+\d+%$`)},
		} {
			var out string
			var err error
			poll.Until(t, time.Minute, func() string {
				return fmt.Sprintf("kubectl %s: %q %v\n%s", strings.Join(c.args, " "), out, err, f.cp.Logs())
			}, func() bool {
				out, err = f.cp.Kubectl(ctx, c.args...)
				return err == nil && c.want.MatchString(strings.TrimSpace(out))
			})
			t.Logf("kubectl %s: %s", strings.Join(c.args, " "), strings.TrimSpace(out))
		}
	})

	// kubectl attach -i joins the main process's stdin and stdout.
	t.Run("attach", func(t *testing.T) {
		spec := sleeper()
		spec.Containers[0].Command = []string{"sh", "-c", "while read line; do echo got:$line; done"}
		spec.Containers[0].Stdin = true
		f.runPod(t, "talk", spec)
		cmd := f.kubectl(t, "attach", "-i", "talk")
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		var out syncbuf.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if _, err := io.WriteString(stdin, "hello\n"); err != nil { // kubectl sends it once attached
			t.Fatal(err)
		}
		poll.Until(t, 30*time.Second, func() string { return fmt.Sprintf("kubectl attach -i to echo the line back (shows %q)", out.String()) }, func() bool {
			return strings.Contains(out.String(), "got:hello")
		})
	})

	t.Run("port-forward", func(t *testing.T) {
		cmd := f.kubectl(t, "port-forward", "pod/web", ":8080")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr syncbuf.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		lines := bufio.NewScanner(stdout)
		forwarding := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) -> 8080`)
		var local string
		for local == "" && lines.Scan() {
			if m := forwarding.FindStringSubmatch(lines.Text()); m != nil {
				local = m[1]
			}
		}
		if local == "" {
			t.Fatalf("kubectl port-forward said no local port: %s", stderr.String())
		}
		go func() {
			for lines.Scan() { // drain "Handling connection" lines
			}
		}()
		resp, err := http.Get("http://" + local + "/")
		if err != nil {
			t.Fatalf("GET through the port-forward: %v (%s)", err, stderr.String())
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.TrimSpace(string(body)) != "port-forwarded" {
			t.Errorf("GET through the port-forward: %d %q, want the pod's page", resp.StatusCode, body)
		}
	})
}
