package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/schemas/natsjs"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
)

func connect(t *testing.T, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.Connect(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func webPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
}

func TestSentinelErrors(t *testing.T) {
	f := startFleet()
	t.Cleanup(f.stop)
	c := connect(t, client.Options{URL: f.url})
	ctx := t.Context()

	t.Run("a pod nobody knows is ErrNotFound", func(t *testing.T) {
		_, err := c.GetPod(ctx, "", client.PodRef{Namespace: "default", Name: "nope"})
		if !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("a node nobody knows is ErrNotFound", func(t *testing.T) {
		_, err := c.GetNode(ctx, "n9")
		if !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("a NATS without jetlet's streams is ErrNotFound", func(t *testing.T) {
		bare := natstest.RunServer(t)
		c := connect(t, client.Options{URL: bare.ClientURL()})
		_, err := c.Nodes(ctx, "")
		if !errors.Is(err, client.ErrNotFound) || !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Fatalf("got %v, want ErrNotFound wrapping jetstream.ErrBucketNotFound", err)
		}
	})
	t.Run("an invalid pod is ErrInvalid and nothing is published", func(t *testing.T) {
		pod := webPod("bad")
		pod.Spec.Containers[0].Image = ""
		_, err := c.Apply(ctx, "n1", pod)
		var invalid *client.InvalidError
		if !errors.Is(err, client.ErrInvalid) || !errors.As(err, &invalid) || len(invalid.Reasons) == 0 {
			t.Fatalf("got %v, want an *InvalidError", err)
		}
		if got, err := c.Intents(ctx, "n1", "", false); err != nil || len(got) != 0 {
			t.Fatalf("intents %v, %v; want none", got, err)
		}
	})
	t.Run("an intent NATS refuses is ErrDenied with the permission", func(t *testing.T) {
		url := deniedIntents(t)
		c := connect(t, client.Options{URL: url, User: "sched", Password: "pw"})
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := c.Apply(ctx, "n1", webPod("web"))
		var denied *client.DeniedError
		var pe *natsjs.PermissionError
		switch {
		case !errors.Is(err, client.ErrDenied), !errors.As(err, &denied), !errors.As(err, &pe):
			t.Fatalf("got %v, want a *DeniedError", err)
		case pe.Op != "publish" || !strings.HasPrefix(pe.Subject, "jetlet.intent.n1."):
			t.Fatalf("denied %s %s, want the intent's publish", pe.Op, pe.Subject)
		case ctx.Err() != nil:
			t.Fatal("the denial was not noticed before the deadline")
		}
	})
	t.Run("a rejected result is ErrRejected with its reason", func(t *testing.T) {
		err := error(&client.RejectedError{Result: &schemas.SyncResult{Outcome: schemas.OutcomeRejected, Reason: "OutOfmemory"}})
		var rej *client.RejectedError
		if !errors.Is(fmt.Errorf("placing: %w", err), client.ErrRejected) || !errors.As(err, &rej) || rej.Reason() != "OutOfmemory" {
			t.Fatalf("%v: not matched as ErrRejected with its reason", err)
		}
	})
}

// deniedIntents starts a server whose user sched may do anything but
// publish intents, with jetlet's streams, and returns its URL.
func deniedIntents(t *testing.T) string {
	t.Helper()
	opts := natstest.Options(t.TempDir())
	opts.Users = []*server.User{
		{Username: "op", Password: "pw"},
		{Username: "sched", Password: "pw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"jetlet.intent.>"}},
		}},
	}
	srv := natstest.Start(t, opts)
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("op", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	cfg := natsjs.StreamsConfig{Storage: jetstream.MemoryStorage}
	cfg.SetDefaults()
	if err := natsjs.Provision(t.Context(), js, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	return srv.ClientURL()
}

// TestWaitRejected applies to a real `jetlet run` node a pod that asks for
// more memory than the node has: Wait returns the result with an
// ErrRejected carrying the admission's reason.
func TestWaitRejected(t *testing.T) {
	jetlettest.Binary(t)
	dir, err := os.MkdirTemp("", "jrun") // short: the runtime's socket lives under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dataDir := filepath.Join(dir, "jetlet-data")
	jetlettest.RemovePodsOnCleanup(t, dataDir)
	t.Chdir(dir)
	p := jetlettest.Start(t, "run", "--node", "n1", "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	p.WaitReady(60 * time.Second)
	c := connect(t, client.Options{URL: p.NATSURL(), DataDir: dataDir})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	pod := webPod("huge")
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Ti")}
	in, err := c.Apply(ctx, "n1", pod)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Wait(ctx, in, client.WaitOptions{})
	var rej *client.RejectedError
	switch {
	case !errors.Is(err, client.ErrRejected) || !errors.As(err, &rej):
		t.Fatalf("Wait: %v, want ErrRejected", err)
	case res == nil || res.Outcome != schemas.OutcomeRejected || res.IntentSeq != in.Seq:
		t.Fatalf("result %+v, want the Rejected result of intent %d", res, in.Seq)
	case rej.Reason() != "OutOfmemory":
		t.Fatalf("reason %q, want OutOfmemory", rej.Reason())
	}
}

// TestEventsResumed follows events while they are being stored, stops
// part-way as a killed auditor would, and resumes from the position it
// stored: every event is handed over once, in order.
func TestEventsResumed(t *testing.T) {
	f := startFleet()
	t.Cleanup(f.stop)
	c := connect(t, client.Options{URL: f.url})
	const total = 200
	published := make(chan struct{})
	go func() {
		defer close(published)
		for i := range total {
			f.event("n1", fmt.Sprintf("u%d", i%7), "web", schemas.EventContainerStarted)
		}
	}()
	t.Cleanup(func() { <-published }) // before the server stops
	var ledger []uint64               // what the auditor wrote
	var stored uint64                 // the position it keeps
	errKilled := errors.New("killed")
	handle := func(stopAt int) func(*client.Event) error {
		return func(e *client.Event) error {
			if len(ledger) == stopAt {
				return errKilled
			}
			ledger = append(ledger, e.Seq)
			stored = e.Seq
			return nil
		}
	}
	for _, stopAt := range []int{37, 38, 120} { // stopped twice mid-stream, once at once
		err := c.Events(t.Context(), client.EventsOptions{After: stored, Follow: true}, handle(stopAt))
		if !errors.Is(err, errKilled) {
			t.Fatalf("Events: %v, want it ended by the handler", err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	err := c.Events(ctx, client.EventsOptions{After: stored, Follow: true}, func(e *client.Event) error {
		ledger, stored = append(ledger, e.Seq), e.Seq
		if len(ledger) == total {
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ledger) != total {
		t.Fatalf("%d events in the ledger, want %d", len(ledger), total)
	}
	for i, seq := range ledger {
		if seq != uint64(i+1) {
			t.Fatalf("ledger[%d] is event %d, want %d: one missed or doubled", i, seq, i+1)
		}
	}
}

// TestWaitHandsOverTheSyncsEvents stores, as a node would, an event of the
// sync and then the result of an intent published on fresh streams: Wait
// hands over the event, the first of its stream, and returns the result.
func TestWaitHandsOverTheSyncsEvents(t *testing.T) {
	f := startFleet()
	t.Cleanup(f.stop)
	c := connect(t, client.Options{URL: f.url})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	in, err := c.Apply(ctx, "n1", webPod("web"))
	if err != nil {
		t.Fatal(err)
	}
	f.event("n1", in.UID, "web", schemas.EventSandboxCreated)
	res := schemas.SyncResult{APIVersion: schemas.APIVersion, Kind: schemas.KindSyncResult, Node: "n1", UID: in.UID,
		Namespace: "default", Name: "web", IntentSeq: in.Seq, Revision: in.Revision, Op: schemas.OpApply, Outcome: schemas.OutcomeSynced}
	data, _ := json.Marshal(res)
	msg := nats.NewMsg(schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}.Result("n1", in.UID))
	msg.Data = data
	msg.Header.Set(schemas.HeaderIntentSeq, strconv.FormatUint(in.Seq, 10))
	if _, err := f.js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
	var events []schemas.EventType
	got, err := c.Wait(ctx, in, client.WaitOptions{OnEvent: func(ev *schemas.LifecycleEvent) { events = append(events, ev.Type) }})
	if err != nil || got.Outcome != schemas.OutcomeSynced || got.IntentSeq != in.Seq {
		t.Fatalf("Wait: %+v, %v; want the Synced result of intent %d", got, err, in.Seq)
	}
	if !slices.Equal(events, []schemas.EventType{schemas.EventSandboxCreated}) {
		t.Fatalf("events %v, want [SandboxCreated]", events)
	}
}
