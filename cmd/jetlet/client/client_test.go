package client

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
)

func TestClientReportsUnreachableNATS(t *testing.T) {
	url := "nats://127.0.0.1:" + jetlettest.FreePort(t)
	for _, args := range [][]string{
		{"apply", "-f", examples + "web.yaml"},
		{"delete", "default/web"},
		{"get", "pods"},
		{"get", "nodes"},
		{"events"},
		{"history", "default/web"},
	} {
		res := runCLI(t.Context(), "", append(args, "--nats-url", url)...)
		wantCode(t, res, 1)
		want := "cannot reach NATS at " + url + ": connection refused; is `jetlet run` running?"
		if !strings.Contains(res.stderr, want) {
			t.Errorf("jetlet %s: stderr %q, want %q", strings.Join(args, " "), res.stderr, want)
		}
	}
}

func TestClientFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "pods", "--node", "Bad_Node"}, `--node "Bad_Node": not a DNS-1123 label`},
		{[]string{"get", "pods", "--subject-prefix", "a.b"}, `--subject-prefix "a.b": must be one subject token`},
		{[]string{"get", "pods", "-o", "table"}, `-o "table": want one of wide, json, yaml`},
		{[]string{"events", "--type", "Exploded"}, `--type "Exploded": want one of SandboxCreated`},
		{[]string{"events", "--since", "yesterday"}, `--since "yesterday": want a duration like 10m`},
		{[]string{"delete"}, "name the pod: NAMESPACE/NAME or --uid UID"},
		{[]string{"delete", "default/web", "--uid", "x"}, "give NAMESPACE/NAME or --uid, not both"},
		{[]string{"history", "--uid", "a.b"}, `--uid "a.b": not a pod UID`},
		{[]string{"apply"}, `required flag(s) "filename" not set`},
		{[]string{"get"}, "get what?"},
	} {
		res := runCLI(t.Context(), "", tc.args...)
		if res.code != 1 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("jetlet %s: exit %d, stderr %q; want exit 1 and %q", strings.Join(tc.args, " "), res.code, res.stderr, tc.want)
		}
	}
}

func TestClientExplainsMissingStreams(t *testing.T) {
	bare := natstest.RunServer(t) // JetStream, but `jetlet run` never provisioned it
	noJS := natstest.Options(t.TempDir())
	noJS.JetStream = false
	plain := natstest.Start(t, noJS)
	for _, tc := range []struct {
		url  string
		args []string
		want string
	}{
		{bare.ClientURL(), []string{"get", "pods"}, "bucket jetlet_status not found at " + bare.ClientURL() + "; start `jetlet run` once"},
		{bare.ClientURL(), []string{"events"}, "stream JETLET_EVENTS not found"},
		{bare.ClientURL(), []string{"apply", "-f", examples + "web.yaml", "--node", "n1"}, "not found at " + bare.ClientURL()},
		{plain.ClientURL(), []string{"get", "nodes"}, "has no JetStream"},
	} {
		res := runCLI(t.Context(), "", append(tc.args, "--nats-url", tc.url)...)
		if res.code != 1 || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("jetlet %s: exit %d, stderr %q; want exit 1 and %q", strings.Join(tc.args, " "), res.code, res.stderr, tc.want)
		}
	}
}

// The built binary reports errors through main's path: a message on stderr
// and the exit code.
func TestBinaryExitCodes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := jetlettest.Binary(t)
	url := "nats://127.0.0.1:" + jetlettest.FreePort(t)
	cmd := exec.Command(bin, "get", "pods", "--nats-url", url)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1; output %s", err, out)
	}
	want := "jetlet: cannot reach NATS at " + url + ": connection refused; is `jetlet run` running?\n"
	if string(out) != want {
		t.Errorf("output %q, want %q", out, want)
	}

	c := newCluster(t)
	c.heartbeat("n1")
	cmd = exec.Command(bin, "apply", "-f", "-", "--nats-url", c.url)
	cmd.Stdin = strings.NewReader(strings.Replace(podYAML("x", "app"), "busybox:1.36", "", 1))
	out, err = cmd.CombinedOutput()
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "nothing was published") {
		t.Errorf("invalid manifest: exit %v, output %s", err, out)
	}
	cmd = exec.Command(bin, "apply", "-f", examples+"web.yaml")
	cmd.Env = append(os.Environ(), "JETLET_NATS_URL="+c.url)
	if out, err = cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "pod/default/web applied on node n1") {
		t.Errorf("apply with JETLET_NATS_URL: %v, output %s", err, out)
	}
}
