package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/jetlet/jetlet/consumer/results"
	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/runtime/nodeservice/nodeclient"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/testimages"
)

// permServer is a real nats-server started from the output of `jetlet
// nats-config`, and the seeds of its users.
type permServer struct {
	url     string
	keysDir string
	bin     string
}

func (s *permServer) seed(user string) string { return filepath.Join(s.keysDir, user+".nk") }

// as runs the jetlet binary with user's credentials against the server.
func (s *permServer) as(t *testing.T, user string, args ...string) cliRun {
	t.Helper()
	args = append(args, "--nats-url", s.url, "--nats-nkey", s.seed(user))
	switch {
	case user == "auditor":
		args = append(args, "--nats-inbox-prefix", "_INBOX_auditor")
	case strings.HasPrefix(user, "node-"):
		args = append(args, "--nats-inbox-prefix", "_INBOX_"+strings.TrimPrefix(user, "node-"))
	}
	return runBinary(t, s.bin, nil, args...)
}

// startPermServer writes `jetlet nats-config --nodes nodes` (with
// configArgs) to a file that a server config includes beside JetStream and
// extra, and starts nats-server from it as nats-server itself reads a
// config file.
func startPermServer(t *testing.T, nodes string, extra string, configArgs ...string) *permServer {
	t.Helper()
	dir := t.TempDir()
	s := &permServer{keysDir: filepath.Join(dir, "keys"), bin: jetlettest.Binary(t)}
	res := runBinary(t, s.bin, nil, append([]string{"nats-config", "--nodes", nodes, "--keys-dir", s.keysDir}, configArgs...)...)
	if res.code != 0 {
		t.Fatalf("nats-config: exit %d: %s", res.code, res.stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "jetlet-auth.conf"), []byte(res.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "nats.conf")
	main := fmt.Sprintf("listen: \"127.0.0.1:-1\"\njetstream { store_dir: %q }\n%s\ninclude \"jetlet-auth.conf\"\n", filepath.Join(dir, "js"), extra)
	if err := os.WriteFile(conf, []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("nats-server refuses the config: %v\n%s", err, res.stdout)
	}
	opts.NoSigs, opts.NoLog = true, true
	srv := natstest.Start(t, *opts)
	s.url = srv.ClientURL()
	return s
}

// userConn is a connection as one user that collects what NATS denied it.
type userConn struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	denied  chan *natsjs.PermissionError
	denials natsjs.Denials // ends a denied call at once
}

func (s *permServer) connect(t *testing.T, user string, opts ...nats.Option) *userConn {
	t.Helper()
	u := &userConn{denied: make(chan *natsjs.PermissionError, 64)}
	seed, err := nats.NkeyOptionFromSeed(s.seed(user))
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, seed, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if pe, ok := natsjs.AsPermissionError(err); ok {
			u.denials.Observe(pe)
			u.denied <- pe
		}
	}))
	if u.nc, err = nats.Connect(s.url, opts...); err != nil {
		t.Fatalf("connect as %s: %v", user, err)
	}
	t.Cleanup(u.nc.Close)
	if u.js, err = jetstream.New(u.nc); err != nil {
		t.Fatal(err)
	}
	return u
}

// wantDenied runs do and checks that NATS denied the user op on subject, and
// that do failed.
func (u *userConn) wantDenied(t *testing.T, op, subject string, do func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ctx, stop := u.denials.Watch(ctx, subject)
	defer stop()
	err := do(ctx)
	timeout := time.After(5 * time.Second)
	for {
		select {
		case pe := <-u.denied:
			if pe.Op == op && pe.Subject == subject {
				if err == nil {
					t.Errorf("%s %s: denied by NATS, yet it succeeded", op, subject)
				}
				return
			}
		case <-timeout:
			t.Errorf("%s %s: not denied (the call returned %v)", op, subject, err)
			return
		}
	}
}

func TestNATSConfigRoles(t *testing.T) {
	t.Parallel()
	s := startPermServer(t, "n1,n2", "")

	t.Run("a node may not provision", func(t *testing.T) {
		res := s.as(t, "node-n1", "provision")
		wantRefused(t, res, "denied these credentials $JS.API.STREAM.", "operator")
	})
	t.Run("a node without the streams names what is missing", func(t *testing.T) {
		res := runBinary(t, s.bin, nil, "run", "--node", "n1", "--data-dir", t.TempDir(), "--http-listen", "127.0.0.1:0",
			"--nats-url", s.url, "--nats-nkey", s.seed("node-n1"))
		wantRefused(t, res, "stream JETLET_INTENTS, stream JETLET_RESULTS, stream JETLET_EVENTS, stream JETLET_DEAD, bucket jetlet_status, bucket jetlet_nodes, bucket jetlet_configmaps, bucket jetlet_secrets, object store jetlet_images missing",
			"run `jetlet provision` once with the operator's credentials")
	})
	if res := s.as(t, "operator", "provision"); res.code != 0 {
		t.Fatalf("provision as the operator: exit %d", res.code)
	}

	dataDir := t.TempDir()
	jetlettest.RemovePodsOnCleanup(t, dataDir)
	registry := "127.0.0.1:" + itoa(freePort(t))
	n1Args := []string{"run", "--node", "n1", "--data-dir", dataDir, "--http-listen", "127.0.0.1:0",
		"--nats-url", s.url, "--nats-nkey", s.seed("node-n1"), "--image-registry-listen", registry}
	n1 := jetlettest.Start(t, n1Args...)
	n1.WaitReady(60 * time.Second)

	t.Run("the scheduler pushes images, n1 serves them and may not push", func(t *testing.T) {
		busybox := testimages.Must(t, testimages.Busybox)
		archive := filepath.Join(t.TempDir(), "busybox.tar")
		writeArchive(t, archive, map[string]v1.Image{"busybox:1.36": busybox})
		if res := s.as(t, "scheduler", "image", "push", "busybox:1.36", archive); res.code != 0 {
			t.Fatalf("image push as the scheduler: exit %d", res.code)
		}
		if res := s.as(t, "scheduler", "image", "ls"); res.code != 0 || !strings.Contains(res.stdout, "docker.io/library/busybox:1.36") {
			t.Errorf("image ls as the scheduler: exit %d\n%s", res.code, res.stdout)
		}
		ref, err := name.ParseReference(registry+"/library/busybox:1.36", name.Insecure)
		if err != nil {
			t.Fatal(err)
		}
		pulled, err := remote.Image(ref, remote.WithContext(t.Context()))
		if err != nil {
			t.Fatalf("pull through n1's registry: %v", err)
		}
		if got, want := mustDigest(t, pulled), mustDigest(t, busybox); got != want {
			t.Errorf("n1's registry served %s, the scheduler pushed %s", got, want)
		}
		layers, err := pulled.Layers()
		if err != nil {
			t.Fatal(err)
		}
		rc, err := layers[0].Compressed() // checked against its digest as it is read
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		if _, err := io.Copy(io.Discard, rc); err != nil {
			t.Errorf("a layer through n1's registry: %v", err)
		}

		other := filepath.Join(t.TempDir(), "other.tar")
		writeArchive(t, other, map[string]v1.Image{"busybox:1.37": testimages.Must(t, testimages.NonRoot)})
		res := s.as(t, "node-n1", "image", "push", "busybox:1.37", other, "--nats-inbox-prefix", "_INBOX_n1")
		wantRefused(t, res, "denied these credentials $O.jetlet_images.C.", "the scheduler's or the operator's")
	})

	t.Run("only the operator cordons n1", func(t *testing.T) {
		for _, user := range []string{"scheduler", "auditor", "node-n2"} {
			wantRefused(t, s.as(t, user, "node", "cordon", "n1"), "denied these credentials", "jetlet.node.n1.cordon")
		}
		for _, verb := range []string{"cordon", "uncordon"} {
			if res := s.as(t, "operator", "node", verb, "n1"); res.code != 0 || !strings.Contains(res.stdout, "node/n1 "+verb+"ed") {
				t.Errorf("node %s n1 as the operator: exit %d, stdout %q", verb, res.code, res.stdout)
			}
		}
	})

	t.Run("the scheduler applies a pod and n1 syncs it", func(t *testing.T) {
		res := s.as(t, "scheduler", "apply", "-f", mustAbs(t, webYAML), "--node", "n1", "--wait")
		if res.code != 0 || !strings.Contains(res.stdout, "Synced") {
			t.Fatalf("apply --wait as the scheduler: exit %d", res.code)
		}
		poll.Until(t, 30*time.Second, poll.Msg("web Running in get pods"), func() bool {
			res := s.as(t, "scheduler", "get", "pods")
			return regexp.MustCompile(`web\s+1/1\s+Running`).MatchString(res.stdout)
		})
	})

	n1c := s.connect(t, "node-n1", nats.CustomInboxPrefix("_INBOX_n1"))
	t.Run("n1 cannot fetch n2's intents", func(t *testing.T) {
		n1c.wantDenied(t, "publish", "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n2.jetlet.intent.n2.>", func(ctx context.Context) error {
			_, err := n1c.js.CreateOrUpdateConsumer(ctx, "JETLET_INTENTS", jetstream.ConsumerConfig{Durable: "jetlet-n2", FilterSubject: "jetlet.intent.n2.>"})
			return err
		})
		// Its own consumer's name does not help: the filter is in the subject.
		n1c.wantDenied(t, "publish", "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n1.jetlet.intent.n2.>", func(ctx context.Context) error {
			_, err := n1c.js.CreateOrUpdateConsumer(ctx, "JETLET_INTENTS", jetstream.ConsumerConfig{Durable: "jetlet-n1", FilterSubject: "jetlet.intent.n2.>"})
			return err
		})
		n1c.wantDenied(t, "publish", "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n1", func(ctx context.Context) error {
			_, err := n1c.js.CreateOrUpdateConsumer(ctx, "JETLET_INTENTS", jetstream.ConsumerConfig{Durable: "jetlet-n1",
				FilterSubjects: []string{"jetlet.intent.n1.>", "jetlet.intent.n2.>"}})
			return err
		})
		// Nor does a body whose filter is not the subject's: NATS refuses it.
		create := "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n1.jetlet.intent.n1.>"
		reply, err := n1c.nc.RequestWithContext(t.Context(), create,
			[]byte(`{"stream_name":"JETLET_INTENTS","config":{"durable_name":"jetlet-n1","filter_subject":"jetlet.intent.n2.>","ack_policy":"explicit"}}`))
		if err != nil || !strings.Contains(string(reply.Data), `"error"`) {
			t.Errorf("create with another filter in the body: %v %s", err, reply.Data)
		}
		n1c.wantDenied(t, "publish", "$JS.API.CONSUMER.MSG.NEXT.JETLET_INTENTS.jetlet-n2", func(ctx context.Context) error {
			_, err := n1c.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.MSG.NEXT.JETLET_INTENTS.jetlet-n2", []byte(`{"batch":1}`))
			return err
		})
		n1c.wantDenied(t, "publish", "$JS.API.DIRECT.GET.JETLET_INTENTS.jetlet.intent.n2.u1", func(ctx context.Context) error {
			_, err := n1c.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET.JETLET_INTENTS.jetlet.intent.n2.u1", nil)
			return err
		})
		n1c.wantDenied(t, "subscribe", "jetlet.intent.n2.>", func(context.Context) error {
			sub, err := n1c.nc.SubscribeSync("jetlet.intent.n2.>")
			if err == nil {
				err = n1c.nc.Flush()
			}
			if err == nil {
				_, err = sub.NextMsg(time.Second) // the subscription ends with the denial
			}
			return err
		})
		n1c.wantDenied(t, "subscribe", "_INBOX.>", func(context.Context) error {
			sub, err := n1c.nc.SubscribeSync("_INBOX.>")
			if err == nil {
				_, err = sub.NextMsg(time.Second)
			}
			return err
		})
	})
	t.Run("n1 cannot publish n2's result, event or status", func(t *testing.T) {
		for _, subject := range []string{"jetlet.result.n2.u1", "jetlet.event.n2.u1.ContainerStarted", "jetlet.dead.n2", "$KV.jetlet_status.n2.u1", "$KV.jetlet_nodes.n2"} {
			n1c.wantDenied(t, "publish", subject, func(ctx context.Context) error {
				_, err := n1c.js.Publish(ctx, subject, []byte("{}"))
				return err
			})
		}
	})
	t.Run("n1 may publish its own", func(t *testing.T) {
		if _, err := n1c.js.Publish(t.Context(), "jetlet.dead.n1", []byte("{}")); err != nil {
			t.Errorf("publish a dead letter as n1: %v", err)
		}
		status, err := n1c.js.KeyValue(t.Context(), "jetlet_status")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := status.Put(t.Context(), "n1.probe", []byte("{}")); err != nil {
			t.Errorf("put its own status key as n1: %v", err)
		}
		if err := status.Delete(t.Context(), "n1.probe"); err != nil {
			t.Errorf("delete its own status key as n1: %v", err)
		}
		if err := n1c.js.DeleteConsumer(t.Context(), "JETLET_INTENTS", "jetlet-n1-replay"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Errorf("delete its replay consumer (gone after the replay): %v, want not found", err)
		}
	})

	t.Run("n1 cannot serve n2's logs or exec", func(t *testing.T) {
		for _, subject := range []string{"jetlet.node.n2.logs", "jetlet.node.n2.exec", "jetlet.node.n2.credit.x"} {
			n1c.wantDenied(t, "subscribe", subject, func(context.Context) error {
				sub, err := n1c.nc.SubscribeSync(subject)
				if err == nil {
					err = n1c.nc.Flush()
				}
				if err == nil {
					_, err = sub.NextMsg(time.Second) // the subscription ends with the denial
				}
				return err
			})
		}
	})
	t.Run("the scheduler execs and reads logs through n1's service", func(t *testing.T) {
		sc := s.connect(t, "scheduler")
		subj := schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}
		ref := schemas.PodRef{Namespace: "default", Name: "web"}
		resp, err := nodeclient.Exec(t.Context(), sc.nc, subj, "n1", schemas.ExecRequest{PodRef: ref, Command: []string{"sh", "-c", "echo as-scheduler; exit 4"}})
		if err != nil || string(resp.Stdout) != "as-scheduler\n" || resp.ExitCode != 4 {
			t.Fatalf("exec as the scheduler: %+v, %v", resp, err)
		}
		var out strings.Builder
		// A window of 1 makes every chunk wait for credit: the stream
		// needs both the node's many replies and the scheduler's credit.
		if end, err := nodeclient.Logs(t.Context(), sc.nc, subj, "n1", schemas.LogsRequest{PodRef: ref, Window: 1}, &out); err != nil || end != schemas.LogEndEOF || out.Len() == 0 {
			t.Fatalf("logs as the scheduler: %q, end %q, %v", out.String(), end, err)
		}
	})
	t.Run("the auditor reads logs but may not exec", func(t *testing.T) {
		ac := s.connect(t, "auditor", nats.CustomInboxPrefix("_INBOX_auditor"))
		subj := schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}
		ref := schemas.PodRef{Namespace: "default", Name: "web"}
		var out strings.Builder
		if end, err := nodeclient.Logs(t.Context(), ac.nc, subj, "n1", schemas.LogsRequest{PodRef: ref}, &out); err != nil || end != schemas.LogEndEOF {
			t.Fatalf("logs as the auditor: end %q, %v", end, err)
		}
		ac.wantDenied(t, "publish", "jetlet.node.n1.exec", func(ctx context.Context) error {
			_, err := nodeclient.Exec(ctx, ac.nc, subj, "n1", schemas.ExecRequest{PodRef: ref, Command: []string{"true"}})
			return err
		})
	})

	t.Run("only the operator asks n1's usage", func(t *testing.T) {
		for _, user := range []string{"scheduler", "auditor"} {
			wantRefused(t, s.as(t, user, "top", "pods"), "denied these credentials", "jetlet.node.n1.stats")
		}
		if res := s.as(t, "operator", "top", "pods"); res.code != 0 || !regexp.MustCompile(`(?m)^web\s+\d+m\s+\d+Mi\s*$`).MatchString(res.stdout) {
			t.Errorf("top pods as the operator: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
	})

	t.Run("only the operator opens streams, and the auditor sees that it did", func(t *testing.T) {
		subj := schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}
		req := schemas.StreamRequest{PodRef: schemas.PodRef{Namespace: "default", Name: "web"}, Kind: schemas.StreamExec, Command: []string{"sh", "-c", "exit 6"}}
		sc := s.connect(t, "scheduler")
		ac := s.connect(t, "auditor", nats.CustomInboxPrefix("_INBOX_auditor"))
		for _, u := range []*userConn{sc, ac} {
			u.wantDenied(t, "publish", "jetlet.node.n1.stream", func(ctx context.Context) error {
				_, err := nodeclient.OpenStream(ctx, u.nc, subj, "n1", req)
				return err
			})
		}
		n1c.wantDenied(t, "subscribe", "jetlet.node.n2.stream.*", func(context.Context) error {
			sub, err := n1c.nc.SubscribeSync("jetlet.node.n2.stream.*")
			if err == nil {
				err = n1c.nc.Flush()
			}
			if err == nil {
				_, err = sub.NextMsg(time.Second)
			}
			return err
		})
		oc := s.connect(t, "operator")
		st, err := nodeclient.OpenStream(t.Context(), oc.nc, subj, "n1", req)
		if err != nil {
			t.Fatalf("a stream as the operator: %v", err)
		}
		if exit, err := st.Run(t.Context(), nodeclient.StreamIO{Stdout: io.Discard, Stderr: io.Discard}); err != nil || exit.ExitCode != 6 {
			t.Fatalf("the operator's stream: %+v, %v", exit, err)
		}
		events, err := ac.js.OrderedConsumer(t.Context(), "JETLET_EVENTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"jetlet.event.n1.*.StreamOpened"}})
		if err != nil {
			t.Fatalf("read events as the auditor: %v", err)
		}
		m, err := events.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("the StreamOpened event: %v", err)
		}
		var ev schemas.LifecycleEvent
		if err := json.Unmarshal(m.Data(), &ev); err != nil || ev.Pod != "web" || ev.Reason != schemas.StreamExec || strings.Contains(string(m.Data()), "exit 6") {
			t.Fatalf("the StreamOpened event, without the command: %s, %v", m.Data(), err)
		}
	})
	t.Run("the auditor's commands work with its credentials", func(t *testing.T) {
		// Ages without the intents it may not read (pod specs may hold
		// secrets): the read is denied at once, not waited out per pod.
		res := s.as(t, "auditor", "get", "pods", "-A")
		if res.code != 0 || !regexp.MustCompile(`web\s+1/1\s+Running`).MatchString(res.stdout) {
			t.Errorf("get pods -A as the auditor: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		res = s.as(t, "auditor", "logs", "default/web")
		if res.code != 0 {
			t.Errorf("logs as the auditor: exit %d\n%s", res.code, res.stderr)
		}
		res = s.as(t, "auditor", "describe", "pod", "default/web")
		if res.code != 0 || !strings.Contains(res.stdout, "Status:") {
			t.Errorf("describe pod as the auditor: exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		res = s.as(t, "auditor", "history", "default/web")
		wantRefused(t, res, `NATS refused to let this user publish to "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.`)
	})
	t.Run("credentials without their inbox prefix fail at once, saying so", func(t *testing.T) {
		res := runBinary(t, s.bin, nil, "get", "pods", "--nats-url", s.url, "--nats-nkey", s.seed("auditor"))
		wantRefused(t, res, "NATS refused these credentials a subscription to _INBOX.>", "--nats-inbox-prefix", "_INBOX_auditor to the auditor")
	})

	t.Run("n1's read-backs work with its credentials", func(t *testing.T) {
		answers, err := results.New(n1c.js, results.Config{Node: "n1", Denials: &n1c.denials})
		if err != nil {
			t.Fatal(err)
		}
		answered, err := answers.AnsweredSince(t.Context(), time.Time{})
		if err != nil || len(answered) == 0 {
			t.Errorf("results read-back as n1: %v, %v", answered, err)
		}
		// A pod new to the publisher is read back before its event is stored.
		pub, err := events.New(n1c.js, events.Config{Node: "n1", Logger: zerolog.Nop(), Denials: &n1c.denials})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		wg.Go(func() { pub.Run(ctx) })
		defer func() { cancel(); wg.Wait() }()
		pub.Emit(ctx, schemas.LifecycleEvent{ID: "perms-test.SandboxCreated", Type: schemas.EventSandboxCreated, UID: "perms-test", Time: time.Now()})
		flushCtx, stop := context.WithTimeout(ctx, 10*time.Second)
		defer stop()
		if err := pub.Flush(flushCtx); err != nil {
			t.Errorf("events read-back and publish as n1: %v", err)
		}
		select {
		case pe := <-n1c.denied:
			t.Errorf("NATS denied n1 %s %s", pe.Op, pe.Subject)
		default:
		}
	})
	if strings.Contains(n1.Logs(), "NATS denied") {
		t.Errorf("NATS denied n1 something")
	}

	audit := s.connect(t, "auditor", nats.CustomInboxPrefix("_INBOX_auditor"))
	t.Run("the auditor cannot publish", func(t *testing.T) {
		for _, subject := range []string{"jetlet.intent.n1.u1", "jetlet.result.n1.u1", "jetlet.event.n1.u1.ContainerStarted", "$KV.jetlet_status.n1.u1"} {
			audit.wantDenied(t, "publish", subject, func(ctx context.Context) error {
				_, err := audit.js.Publish(ctx, subject, []byte("{}"))
				return err
			})
		}
		// Nor may it touch a node's durable consumer.
		audit.wantDenied(t, "publish", "$JS.API.CONSUMER.DELETE.JETLET_INTENTS.jetlet-n1", func(ctx context.Context) error {
			return audit.js.DeleteConsumer(ctx, "JETLET_INTENTS", "jetlet-n1")
		})
		audit.wantDenied(t, "publish", "$JS.API.CONSUMER.CREATE.JETLET_INTENTS.reader.jetlet.intent.>", func(ctx context.Context) error {
			_, err := audit.js.CreateConsumer(ctx, "JETLET_INTENTS", jetstream.ConsumerConfig{Name: "reader", FilterSubject: "jetlet.intent.>"})
			return err
		})
	})
	t.Run("the auditor reads events, results, statuses and nodes", func(t *testing.T) {
		for _, args := range [][]string{{"events", "--node", "n1"}, {"get", "pods"}, {"get", "nodes"}} {
			if res := s.as(t, "auditor", args...); res.code != 0 {
				t.Errorf("%s as the auditor: exit %d", strings.Join(args, " "), res.code)
			}
		}
		oc, err := audit.js.OrderedConsumer(t.Context(), "JETLET_RESULTS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"jetlet.result.n1.*"}})
		if err != nil {
			t.Fatalf("read results as the auditor: %v", err)
		}
		if _, err := oc.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
			t.Errorf("read a result as the auditor: %v", err)
		}
		res := s.as(t, "auditor", "apply", "-f", mustAbs(t, webYAML), "--node", "n1")
		wantRefused(t, res, "denied these credentials", "jetlet.intent.n1.")
	})
	t.Run("the scheduler cannot publish a result", func(t *testing.T) {
		sched := s.connect(t, "scheduler")
		sched.wantDenied(t, "publish", "jetlet.result.n1.u1", func(ctx context.Context) error {
			_, err := sched.js.Publish(ctx, "jetlet.result.n1.u1", []byte("{}"))
			return err
		})
	})

	t.Run("the scheduler cannot take a node's intents or delete its consumer", func(t *testing.T) {
		sched := s.connect(t, "scheduler")
		sched.wantDenied(t, "publish", "$JS.API.CONSUMER.MSG.NEXT.JETLET_INTENTS.jetlet-n1", func(ctx context.Context) error {
			_, err := sched.nc.RequestWithContext(ctx, "$JS.API.CONSUMER.MSG.NEXT.JETLET_INTENTS.jetlet-n1", []byte(`{"batch":1}`))
			return err
		})
		sched.wantDenied(t, "publish", "$JS.API.CONSUMER.DELETE.JETLET_INTENTS.jetlet-n1", func(ctx context.Context) error {
			return sched.js.DeleteConsumer(ctx, "JETLET_INTENTS", "jetlet-n1")
		})
	})

	// Restarted, n1 reads its intents back through its replay consumer and
	// its durable's ack floor.
	n1.Signal(syscall.SIGTERM)
	if code := n1.Wait(60 * time.Second); code != 0 {
		t.Fatalf("jetlet exited %d on SIGTERM", code)
	}
	n1 = jetlettest.Start(t, n1Args...)
	n1.WaitReady(60 * time.Second)
	if line := n1.WaitLog("desired state recovered", 30*time.Second); line["intents"] != 1.0 || line["unanswered"] != 0.0 {
		t.Errorf("recovery: %v", line)
	}
	if strings.Contains(n1.Logs(), "NATS denied") {
		t.Errorf("NATS denied the restarted node something")
	}

	t.Run("a node with another node's credentials says what was denied and exits", func(t *testing.T) {
		wrong := jetlettest.Start(t, "run", "--node", "n2", "--data-dir", t.TempDir(), "--http-listen", "127.0.0.1:0",
			"--nats-url", s.url, "--nats-nkey", s.seed("node-n1"), "--nats-inbox-prefix", "_INBOX_n1")
		if code := wrong.Wait(30 * time.Second); code == 0 {
			t.Errorf("jetlet exited 0 without its durable consumer")
		}
		wantContains(t, "logs", wrong.Logs(), "durable consumer jetlet-n2: permission denied", `"$JS.API.CONSUMER.INFO.JETLET_INTENTS.jetlet-n2"`)

		// With intents to replay, the replay consumer is the first denial,
		// and retrying cannot mend it either.
		if res := s.as(t, "scheduler", "apply", "-f", mustAbs(t, webYAML), "--node", "n2"); res.code != 0 {
			t.Fatalf("apply for n2: exit %d", res.code)
		}
		wrong = jetlettest.Start(t, "run", "--node", "n2", "--data-dir", t.TempDir(), "--http-listen", "127.0.0.1:0",
			"--nats-url", s.url, "--nats-nkey", s.seed("node-n1"), "--nats-inbox-prefix", "_INBOX_n1")
		if code := wrong.Wait(30 * time.Second); code == 0 {
			t.Errorf("jetlet exited 0 without its replay consumer")
		}
		wantContains(t, "logs", wrong.Logs(), "read-back consumer jetlet-n2-replay: permission denied", `"$JS.API.CONSUMER.CREATE.JETLET_INTENTS.jetlet-n2-replay.jetlet.intent.n2.>"`)
	})

	t.Run("node lifecycle", func(t *testing.T) {
		res := s.as(t, "operator", "node", "remove", "n1")
		wantRefused(t, res, "node n1 is live")
		n1.Signal(syscall.SIGTERM)
		if code := n1.Wait(60 * time.Second); code != 0 {
			t.Fatalf("jetlet exited %d on SIGTERM", code)
		}
		res = s.as(t, "auditor", "get", "nodes")
		if !regexp.MustCompile(`n1\s+Stopped\s+<none>\s+<none>\s+1\s`).MatchString(res.stdout) {
			t.Errorf("get nodes after a clean stop:\n%s", res.stdout)
		}
		res = s.as(t, "auditor", "get", "pods")
		if !regexp.MustCompile(`web\s+1/1\s+Unknown\s`).MatchString(res.stdout) {
			t.Errorf("get pods of a stopped node:\n%s", res.stdout)
		}
		op := s.connect(t, "operator")
		if _, err := op.js.Consumer(t.Context(), "JETLET_INTENTS", "jetlet-n1"); err != nil {
			t.Errorf("n1's durable consumer after its stop: %v", err)
		}
		res = s.as(t, "scheduler", "node", "remove", "n1")
		wantRefused(t, res, "denied these credentials")
		res = s.as(t, "operator", "node", "remove", "n1")
		if res.code != 0 || !strings.Contains(res.stdout, "node n1 removed: 1 status keys, consumer jetlet-n1, node record") {
			t.Errorf("node remove: exit %d", res.code)
		}
		res = s.as(t, "auditor", "get", "nodes")
		if strings.Contains(res.stdout, "n1") {
			t.Errorf("get nodes after node remove:\n%s", res.stdout)
		}
		res = s.as(t, "operator", "node", "remove", "n1")
		wantRefused(t, res, "node n1 not found")
	})
}

func wantContains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s do not contain %q", what, w)
		}
	}
}

// writeArchive writes refs as an OCI image layout tar, as ctr images export
// does.
func writeArchive(t *testing.T, file string, refs map[string]v1.Image) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := testimages.WriteOCILayout(f, refs); err != nil {
		t.Fatal(err)
	}
}

func mustDigest(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}
