package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
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
)

// fleet is an embedded nats-server with jetlet's streams and buckets, as
// `jetlet run` provisions them, for the examples (which get no *testing.T).
type fleet struct {
	url  string
	js   jetstream.JetStream
	stop func()
}

func startFleet() *fleet {
	dir, err := os.MkdirTemp("", "client-example")
	if err != nil {
		panic(err)
	}
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true, JetStream: true, StoreDir: dir})
	if err != nil {
		panic(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		panic("nats-server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		panic(err)
	}
	js, _ := jetstream.New(nc)
	cfg := natsjs.StreamsConfig{Storage: jetstream.MemoryStorage}
	cfg.SetDefaults()
	if err := natsjs.Provision(context.Background(), js, cfg, zerolog.Nop()); err != nil {
		panic(err)
	}
	return &fleet{url: srv.ClientURL(), js: js, stop: func() {
		nc.Close()
		srv.Shutdown()
		srv.WaitForShutdown()
		os.RemoveAll(dir)
	}}
}

// heartbeat stores a node record as a node's jetlet does.
func (f *fleet) heartbeat(node string, allocatable corev1.ResourceList, cordoned bool) {
	kv, err := f.js.KeyValue(context.Background(), schemas.BucketNodes)
	if err != nil {
		panic(err)
	}
	rec := schemas.NodeRecord{APIVersion: schemas.APIVersion, Kind: schemas.KindNode, Node: node,
		Allocatable: allocatable, Unschedulable: cordoned, HeartbeatAt: time.Now(),
		Conditions: []schemas.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	data, _ := json.Marshal(rec)
	if _, err := kv.Put(context.Background(), node, data); err != nil {
		panic(err)
	}
}

// event stores a lifecycle event as a node's jetlet does.
func (f *fleet) event(node, uid, pod string, t schemas.EventType) {
	ev := schemas.LifecycleEvent{APIVersion: schemas.APIVersion, Kind: schemas.KindLifecycleEvent, ID: fmt.Sprint(time.Now().UnixNano()),
		Type: t, Node: node, UID: uid, Namespace: "default", Pod: pod, Time: time.Now()}
	data, _ := json.Marshal(ev)
	subj := schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}
	if _, err := f.js.Publish(context.Background(), subj.Event(node, uid, t), data); err != nil {
		panic(err)
	}
}

func ExampleConnect() {
	f := startFleet()
	defer f.stop()
	ctx := context.Background()

	c, err := client.Connect(ctx, client.Options{URL: f.url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	nodes, err := c.Nodes(ctx, "")
	fmt.Println(len(nodes), err)
	// Output: 0 <nil>
}

// A scheduler's view of the fleet: the nodes that take new pods and have
// room for a pod's requests.
func ExampleClient_Nodes() {
	f := startFleet()
	defer f.stop()
	ctx := context.Background()
	f.heartbeat("n1", corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}, false)
	f.heartbeat("n2", corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")}, false)
	f.heartbeat("n3", corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("8Gi")}, true)

	c, err := client.Connect(ctx, client.Options{URL: f.url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	nodes, err := c.Nodes(ctx, "")
	if err != nil {
		fmt.Println(err)
		return
	}
	want := resource.MustParse("1Gi")
	now := time.Now()
	for _, n := range nodes {
		mem := n.Record.Allocatable[corev1.ResourceMemory]
		fmt.Printf("%s %s schedulable=%v fits=%v\n", n.Name, n.State(now), n.Schedulable(now), mem.Cmp(want) >= 0)
	}
	// Output:
	// n1 Ready schedulable=true fits=true
	// n2 Ready schedulable=true fits=false
	// n3 Ready schedulable=false fits=true
}

// Apply picks the pod's uid and revision and publishes its intent; the
// node's result would then come to Wait. A pod applied again unchanged is
// not published again.
func ExampleClient_Apply() {
	f := startFleet()
	defer f.stop()
	ctx := context.Background()
	c, err := client.Connect(ctx, client.Options{URL: f.url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
	first, err := c.Apply(ctx, "n1", pod)
	if err != nil {
		fmt.Println(err)
		return
	}
	// A new image: the node's pod of that name, at its next revision.
	pod.Spec.Containers[0].Image = "busybox:1.36"
	second, err := c.Apply(ctx, "n1", pod)
	if err != nil {
		fmt.Println(err)
		return
	}
	again, err := c.Apply(ctx, "n1", pod)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(first.Revision, second.Revision, first.UID == second.UID, second.Seq)
	fmt.Println(again.Unchanged, again.Revision, again.Seq)
	// Output:
	// 1 2 true 2
	// true 2 2
}

// An auditor resumes from the position it stored: every event once.
func ExampleClient_Events() {
	f := startFleet()
	defer f.stop()
	ctx := context.Background()
	c, err := client.Connect(ctx, client.Options{URL: f.url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	f.event("n1", "u1", "web", schemas.EventContainerStarted)
	f.event("n1", "u1", "web", schemas.EventContainerDied)

	var stored uint64 // where the auditor got to, as it would keep it on disk
	audit := func(e *client.Event) error {
		fmt.Println(e.Seq, e.Type, e.CloudEvent().Type)
		stored = e.Seq
		return nil
	}
	_ = c.Events(ctx, client.EventsOptions{After: stored}, audit)
	f.event("n2", "u2", "db", schemas.EventContainerStarted)
	// Restarted: from the stored position on.
	_ = c.Events(ctx, client.EventsOptions{After: stored}, audit)
	// Output:
	// 1 ContainerStarted dev.jetlet.ContainerStarted
	// 2 ContainerDied dev.jetlet.ContainerDied
	// 3 ContainerStarted dev.jetlet.ContainerStarted
}

// A scheduler's view kept current: every record now, then each change.
func ExampleClient_WatchNodes() {
	f := startFleet()
	defer f.stop()
	f.heartbeat("n1", nil, false)
	c, err := client.Connect(context.Background(), client.Options{URL: f.url})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := 0
	err = c.WatchNodes(ctx, func(n *client.Node) error {
		fmt.Println(n.Name, "cordoned:", n.Record.Unschedulable)
		if seen++; seen == 1 {
			f.heartbeat("n1", nil, true) // `jetlet node cordon n1`, as its record says it
		} else {
			cancel()
		}
		return nil
	})
	fmt.Println(err)
	// Output:
	// n1 cordoned: false
	// n1 cordoned: true
	// <nil>
}
