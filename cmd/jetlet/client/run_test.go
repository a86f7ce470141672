package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

func connect(t *testing.T, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func streamMsgs(t *testing.T, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	s, err := js.Stream(t.Context(), name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	return s.CachedInfo().State.Msgs
}

func TestRunEmbeddedProvisionsRestartsAndStopsCleanly(t *testing.T) {
	dataDir := t.TempDir()
	args := []string{"run", "--node", "n1", "--data-dir", dataDir, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}

	p := jetlettest.Start(t, args...)
	p.WaitReady(30 * time.Second)
	js := connect(t, p.NATSURL(), p.NATSAuth())
	ctx := t.Context()
	for name, subject := range map[string]string{
		schemas.StreamIntents: "jetlet.intent.>",
		schemas.StreamResults: "jetlet.result.>",
		schemas.StreamEvents:  "jetlet.event.>",
		schemas.StreamDead:    "jetlet.dead.>",
	} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
		if got := s.CachedInfo().Config.Subjects; len(got) != 1 || got[0] != subject {
			t.Errorf("%s subjects %v, want [%s]", name, got, subject)
		}
	}
	for _, bucket := range []string{schemas.BucketStatus, schemas.BucketNodes} {
		if _, err := js.KeyValue(ctx, bucket); err != nil {
			t.Errorf("bucket %s: %v", bucket, err)
		}
	}
	// Messages on a stream no consumer reads survive the restart as they are.
	for i := range 3 {
		if _, err := js.Publish(ctx, "jetlet.dead.n1", []byte{byte('0' + i)}); err != nil {
			t.Fatal(err)
		}
	}

	p.Signal(syscall.SIGTERM)
	if code := p.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}

	p2 := jetlettest.Start(t, args...)
	p2.WaitReady(30 * time.Second)
	js2 := connect(t, p2.NATSURL(), p2.NATSAuth())
	if got := streamMsgs(t, js2, schemas.StreamDead); got != 3 {
		t.Errorf("JETLET_DEAD holds %d messages after restart, want 3", got)
	}
	p2.Signal(syscall.SIGINT)
	if code := p2.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGINT, want 0", code)
	}
}

func TestTwoNodesShareOneExternalNATS(t *testing.T) {
	srv := natstest.RunServer(t)
	var procs []*jetlettest.Process
	for _, node := range []string{"node-a", "node-b"} {
		procs = append(procs, jetlettest.Start(t, "run", "--node", node,
			"--data-dir", filepath.Join(t.TempDir(), node), "--nats-url", srv.ClientURL(),
			"--http-listen", "127.0.0.1:0"))
	}
	for _, p := range procs {
		p.WaitReady(30 * time.Second)
	}
	js := connect(t, srv.ClientURL())
	if _, err := js.Stream(t.Context(), schemas.StreamIntents); err != nil {
		t.Fatal(err)
	}
	nodes, err := js.KeyValue(t.Context(), schemas.BucketNodes)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range procs {
		node := []string{"node-a", "node-b"}[i]
		var entry jetstream.KeyValueEntry
		poll.Until(t, 30*time.Second, func() string { return node + "'s heartbeat in " + schemas.BucketNodes }, func() bool {
			entry, err = nodes.Get(t.Context(), node)
			return err == nil
		})
		// The embedded runtime says how far it isolates pods: fully, as root.
		var rec schemas.NodeRecord
		if err := json.Unmarshal(entry.Value(), &rec); err != nil || (os.Geteuid() == 0 && rec.Isolation != schemas.IsolationFull) {
			t.Errorf("%s's record: isolation %q (%v), want %q as root", node, rec.Isolation, err, schemas.IsolationFull)
		}
		if logs := p.Logs(); strings.Contains(logs, `"level":"error"`) || strings.Contains(logs, `"level":"warn"`) {
			t.Errorf("a node logged a warning or error:\n%s", logs)
		}
		p.Signal(syscall.SIGTERM)
		if code := p.Wait(30 * time.Second); code != 0 {
			t.Errorf("exit code %d, want 0", code)
		}
		// Stopped cleanly: its record is gone at once, not after the TTL.
		if _, err := nodes.Get(t.Context(), node); !errors.Is(err, jetstream.ErrKeyNotFound) {
			t.Errorf("%s's heartbeat after SIGTERM: %v, want it deleted", node, err)
		}
	}
}

func TestRunWaitsForAnUnreachableNATS(t *testing.T) {
	// A server that is not there yet: jetlet keeps retrying and is not ready.
	opts := natstest.Options(t.TempDir())
	opts.Port = freePort(t)
	p := jetlettest.Start(t, "run", "--node", "n1", "--data-dir", t.TempDir(),
		"--nats-url", "nats://127.0.0.1:"+itoa(opts.Port), "--http-listen", "127.0.0.1:0")
	addr := p.HTTPAddr()
	if code := httpStatus(t, addr+"/readyz"); code != 503 {
		t.Fatalf("/readyz = %d with NATS down, want 503", code)
	}
	if code := httpStatus(t, addr+"/healthz"); code != 200 {
		t.Fatalf("/healthz = %d, want 200", code)
	}
	natstest.Start(t, opts)
	p.WaitReady(60 * time.Second)
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(30 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
}

func TestFlagsFromEnvironmentAndErrors(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"bad node from env", []string{"JETLET_NODE=Not_A_Label"}, nil, `--node "Not_A_Label": not a DNS-1123 label`},
		{"bad duration from env", []string{"JETLET_MAX_AGE=soon"}, []string{"--node", "n1"}, `JETLET_MAX_AGE="soon"`},
		{"bad workers", nil, []string{"--node", "n1", "--workers", "0"}, "--workers 0"},
		{"half a client certificate", nil, []string{"--node", "n1", "--nats-tls-cert", "c.pem"}, "--nats-tls-cert and --nats-tls-key go together"},
		{"bad log level", nil, []string{"--node", "n1", "--log-level", "loud"}, `log level "loud"`},
		{"ping interval too short", nil, []string{"--node", "n1", "--nats-ping-interval", "10ms"}, "--nats-ping-interval 10ms"},
		{"no pings out", nil, []string{"--node", "n1", "--nats-max-pings-out", "0"}, "--nats-max-pings-out 0"},
		{"insecure external NATS", nil, []string{"--node", "n1", "--nats-url", "nats://127.0.0.1:1", "--nats-insecure"}, "with --nats-url there is none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--data-dir", t.TempDir()}, tt.args...)
			cmd := exec.Command(jetlettest.Binary(t), args...)
			cmd.Env = append(append(cmd.Environ(), jetlettest.PodNetworkEnv(t, args)...), tt.env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("exit 0, want an error; output:\n%s", out)
			}
			if !strings.Contains(string(out), tt.want) {
				t.Errorf("output %q does not contain %q", out, tt.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, jetlettest.Binary(t), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "jetlet ") {
		t.Errorf("version printed %q", out)
	}
}

func TestRunRefusesReplicasTheEmbeddedServerCannotHave(t *testing.T) {
	dataDir := t.TempDir()
	args := []string{"run", "--node", "n1", "--data-dir", dataDir, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}
	// Fresh, and then over streams that exist with 1 replica.
	for _, first := range []bool{true, false} {
		if !first {
			p := jetlettest.Start(t, args...)
			p.WaitReady(30 * time.Second)
			p.Signal(syscall.SIGTERM)
			if code := p.Wait(30 * time.Second); code != 0 {
				t.Fatalf("exit code %d after SIGTERM, want 0", code)
			}
		}
		p := jetlettest.Start(t, append(args, "--replicas", "3")...)
		if code := p.Wait(60 * time.Second); code == 0 {
			t.Fatal("jetlet run --replicas 3 on the embedded server exited 0")
		}
		if want := "replicas unavailable"; !strings.Contains(p.Logs(), want) {
			t.Errorf("logs do not say %q:\n%s", want, p.Logs())
		}
	}
}
