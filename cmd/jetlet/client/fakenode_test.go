package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/consumer/results"
	"github.com/jetlet/jetlet/consumer/status"
	"github.com/jetlet/jetlet/events"
	"github.com/jetlet/jetlet/schemas"
)

// fakeNode plays `jetlet run` for one node as the contract describes it from
// outside: it consumes the node's intents and answers each with one
// SyncResult, after publishing the pod's lifecycle events and status. It runs
// no containers; the client commands cannot tell.
type fakeNode struct {
	c        *cluster
	node     string
	pub      *events.EventPublisher
	statuses *status.StatusWriter
	answers  *results.ResultPublisher
	subj     schemas.Subjects

	// fail, when set, makes the apply of a pod it returns true for Failed, as
	// a container that cannot start.
	fail func(*corev1.Pod) bool

	mu      sync.Mutex
	pods    map[string]*corev1.Pod // uid → the pod last applied
	applied map[string]int64       // uid → highest revision applied
}

// startNode starts answering node's intents and heartbeats it.
func (c *cluster) startNode(node string, fail func(*corev1.Pod) bool) *fakeNode {
	c.t.Helper()
	c.heartbeat(node)
	answers, err := results.New(c.js, results.Config{Node: node})
	if err != nil {
		c.t.Fatal(err)
	}
	statuses, err := status.New(c.js, status.Config{Node: node, Logger: zerolog.Nop()})
	if err != nil {
		c.t.Fatal(err)
	}
	pub, err := events.New(c.js, events.Config{Node: node, Logger: zerolog.Nop()})
	if err != nil {
		c.t.Fatal(err)
	}
	n := &fakeNode{
		c: c, node: node, fail: fail,
		subj:     schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix},
		pub:      pub,
		answers:  answers,
		statuses: statuses,
		pods:     map[string]*corev1.Pod{},
		applied:  map[string]int64{},
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { n.pub.Run(ctx) })
	wg.Go(func() { n.statuses.Run(ctx) })
	cons, err := c.js.CreateOrUpdateConsumer(c.t.Context(), schemas.StreamIntents, jetstream.ConsumerConfig{
		Durable:       "fake-" + node,
		FilterSubject: n.subj.NodeIntents(node),
		AckPolicy:     jetstream.AckExplicitPolicy,
	})
	if err != nil {
		c.t.Fatal(err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		if err := n.handle(ctx, msg); err != nil {
			c.t.Errorf("fake node %s: %v", node, err)
		}
		_ = msg.Ack()
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		cc.Stop()
		<-cc.Closed()
		cancel()
		wg.Wait()
	})
	return n
}

func (n *fakeNode) handle(ctx context.Context, msg jetstream.Msg) error {
	md, err := msg.Metadata()
	if err != nil {
		return err
	}
	uid, ok := n.subj.IntentUID(msg.Subject(), n.node)
	if !ok {
		return nil // the real node dead-letters it; no client command sends one
	}
	res := &schemas.SyncResult{Node: n.node, UID: uid, IntentSeq: md.Sequence.Stream, Op: schemas.OpApply, ReceivedAt: time.Now().UTC()}
	in, err := schemas.DecodeIntent(msg.Data(), schemas.IntentTarget{Node: n.node, UID: uid})
	var st *schemas.PodStatus
	switch {
	case err != nil:
		res.Outcome, res.Error = schemas.OutcomeRejected, err.Error()
		n.emit(ctx, res, schemas.EventIntentRejected, "", nil, err.Error())
	default:
		res.Namespace, res.Name, res.Revision, res.Op = in.Pod.Namespace, in.Pod.Name, in.Revision, in.Op
		n.mu.Lock()
		highest := n.applied[uid]
		stale := in.Revision != 0 && in.Revision < highest
		if !stale {
			n.applied[uid] = max(highest, in.Revision)
		}
		n.mu.Unlock()
		switch {
		case stale:
			res.Outcome, res.Error = schemas.OutcomeStale, fmt.Sprintf("revision %d is lower than %d, already applied", in.Revision, highest)
		case in.Op == schemas.OpDelete:
			st = n.delete(ctx, res)
		default:
			st = n.apply(ctx, res, in.Pod)
		}
	}
	if st != nil {
		res.Status = st
		n.statuses.PutStatus(st)
	}
	if err := n.pub.Flush(ctx); err != nil {
		return err
	}
	if err := n.statuses.Flush(ctx); err != nil {
		return err
	}
	res.FinishedAt = time.Now().UTC()
	return n.answers.PublishResult(ctx, res)
}

func (n *fakeNode) apply(ctx context.Context, res *schemas.SyncResult, pod *corev1.Pod) *schemas.PodStatus {
	n.mu.Lock()
	n.pods[res.UID] = pod
	n.mu.Unlock()
	now := time.Now().UTC()
	st := n.status(res, schemas.PhaseRunning, now)
	st.Sandbox = &schemas.SandboxStatus{ID: "sb-" + res.UID, State: schemas.SandboxReady, IPs: []string{"10.88.0.7"}}
	res.Actions = append(res.Actions, schemas.ActionResult{Action: schemas.ActionCreatePodSandbox, Target: res.UID})
	n.emit(ctx, res, schemas.EventSandboxCreated, "", nil, "")
	failing := n.fail != nil && n.fail(pod)
	for _, c := range pod.Spec.Containers {
		cs := schemas.ContainerStatus{Name: c.Name, ContainerID: "ctr-" + c.Name, Image: c.Image, State: schemas.ContainerRunning, StartedAt: now.Format(time.RFC3339Nano), Ready: true}
		a := schemas.ActionResult{Action: schemas.ActionStartContainer, Target: c.Name}
		n.emit(ctx, res, schemas.EventContainerCreated, c.Name, nil, "")
		n.emit(ctx, res, schemas.EventContainerStarted, c.Name, nil, "")
		if failing {
			code := int32(1)
			n.emit(ctx, res, schemas.EventContainerDied, c.Name, &code, "")
			a.Error = "CrashLoopBackOff"
			a.Message = "back-off 10s restarting failed container " + c.Name
			n.emit(ctx, res, schemas.EventBackOff, c.Name, nil, a.Message)
			cs.State, cs.Reason, cs.Ready, cs.RestartCount, cs.ExitCode = schemas.ContainerWaiting, "CrashLoopBackOff", false, 3, 1
			cs.LastState = &schemas.LastState{ExitCode: 1, Reason: "Error", FinishedAt: now.Format(time.RFC3339Nano)}
			res.Outcome, res.Error = schemas.OutcomeFailed, "StartContainer "+c.Name+": CrashLoopBackOff"
		}
		res.Actions = append(res.Actions, a)
		st.Containers = append(st.Containers, cs)
	}
	if res.Outcome == "" {
		res.Outcome = schemas.OutcomeSynced
	}
	return st
}

func (n *fakeNode) delete(ctx context.Context, res *schemas.SyncResult) *schemas.PodStatus {
	n.mu.Lock()
	pod := n.pods[res.UID]
	delete(n.pods, res.UID)
	n.mu.Unlock()
	res.Outcome = schemas.OutcomeSynced
	if pod == nil {
		return nil // nothing to do
	}
	for _, c := range pod.Spec.Containers {
		res.Actions = append(res.Actions, schemas.ActionResult{Action: schemas.ActionKillContainer, Target: c.Name})
		n.emit(ctx, res, schemas.EventContainerKilled, c.Name, nil, "")
	}
	res.Actions = append(res.Actions, schemas.ActionResult{Action: schemas.ActionKillPodSandbox, Target: res.UID},
		schemas.ActionResult{Action: schemas.ActionRemovePodSandbox, Target: res.UID})
	n.emit(ctx, res, schemas.EventSandboxRemoved, "", nil, "")
	n.emit(ctx, res, schemas.EventPodTerminated, "", nil, "")
	return n.status(res, schemas.PhaseTerminated, time.Now().UTC())
}

func (n *fakeNode) status(res *schemas.SyncResult, phase schemas.PodPhase, now time.Time) *schemas.PodStatus {
	return &schemas.PodStatus{
		UID: res.UID, Namespace: res.Namespace, Name: res.Name, Node: n.node,
		Revision: res.Revision, IntentSeq: res.IntentSeq, Phase: phase,
		InitContainers: []schemas.ContainerStatus{}, Containers: []schemas.ContainerStatus{}, ObservedAt: now,
	}
}

func (n *fakeNode) emit(ctx context.Context, res *schemas.SyncResult, t schemas.EventType, container string, exit *int32, msg string) {
	ev := schemas.LifecycleEvent{
		ID:   fmt.Sprintf("%s-%d-%s-%s", res.UID, res.IntentSeq, t, container),
		Type: t, UID: res.UID, Namespace: res.Namespace, Pod: res.Name, Container: container,
		ExitCode: exit, Message: msg, Time: time.Now().UTC(), IntentSeq: res.IntentSeq, Revision: res.Revision,
	}
	switch t {
	case schemas.EventContainerDied:
		ev.Reason = schemas.ReasonError
	case schemas.EventContainerKilled:
		ev.Reason = schemas.ReasonPodDeleted
	}
	n.pub.Emit(ctx, ev)
}
