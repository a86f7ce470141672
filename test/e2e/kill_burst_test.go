package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/runtime"
	"github.com/jetlet/jetlet/runtime/crilabels"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// burstPod is what a burst has asked of one pod so far.
type burstPod struct {
	uid      string
	crash    bool  // its container exits at once (restartPolicy Always)
	revision int64 // of its newest intent
	script   int   // which variant of its script its newest apply runs
	specs    int   // container specs its applies gave it
	deleted  bool
}

func (p *burstPod) body() string {
	switch {
	case p.deleted:
		return deleteJSON(p.uid, p.revision, 1)
	case p.crash:
		return podJSON(p.uid, p.revision, "Always", fmt.Sprintf("exit %d", 1+p.script))
	}
	return podJSON(p.uid, p.revision, "Always", fmt.Sprintf("exec sleep %d", 600+p.script))
}

type plannedIntent struct{ uid, body string }

// planBurst plans n intents over pods in a random order: each pod is created
// once, updated at random (half the updates change its container spec, half
// only its revision), and `deletes` of them are deleted; nothing follows a
// pod's delete.
func planBurst(pods []*burstPod, n, deletes int, rng *rand.Rand) []plannedIntent {
	var plan []plannedIntent
	var live []*burstPod
	created, updates := 0, n-len(pods)-deletes
	for len(plan) < n {
		var p *burstPod
		creates := len(pods) - created
		switch r := rng.IntN(creates + deletes + updates); {
		case r < creates || len(live) == 0:
			p = pods[created]
			created++
			p.specs = 1
			live = append(live, p)
		case r < creates+deletes:
			i := rng.IntN(len(live))
			p = live[i]
			live = slices.Delete(live, i, i+1)
			p.deleted = true
			deletes--
		default:
			p = live[rng.IntN(len(live))]
			updates--
			if rng.IntN(2) == 0 {
				p.script++
				p.specs++
			}
		}
		p.revision++
		plan = append(plan, plannedIntent{p.uid, p.body()})
	}
	return plan
}

// TestSIGKILLAtTwentyPointsOfABurst is the event-ledger issue's first
// acceptance test: jetlet run is SIGKILLed at 20 points of a 200-intent
// burst over 50 pods (creates, spec changes, deletes, crash-looping
// containers) and restarted each time. Then every intent has exactly one
// result; every container that ran has exactly one ContainerStarted and,
// once it exited, exactly one ContainerDied; no event id is stored twice; no
// container was started again without a new spec.
func TestSIGKILLAtTwentyPointsOfABurst(t *testing.T) {
	if testing.Short() {
		t.Skip("a 200-intent burst with 20 restarts")
	}
	t.Parallel()
	const nPods, nIntents, nDeletes, kills = 50, 200, 15, 20
	pods := make([]*burstPod, nPods)
	for i := range pods {
		pods[i] = &burstPod{uid: fmt.Sprintf("kb-%02d", i), crash: i%5 == 0}
	}
	plan := planBurst(pods, nIntents, nDeletes, rand.New(rand.NewPCG(10, 20)))

	n := startNode(t, shortDir(t), "", "--workers", "8")
	// The embedded NATS dies with jetlet: restarts reuse its port.
	n.extra = append(n.extra, "--nats-listen", strings.TrimPrefix(n.proc.NATSURL(), "nats://"))
	const allResults = "jetlet.result.n1.>"
	seqs := map[uint64]string{}
	chunk := nIntents / kills
	for k := range kills {
		for _, in := range plan[k*chunk : (k+1)*chunk] {
			seqs[n.publish(in.uid, in.body)] = in.uid
		}
		// Kill at a different depth each time: from every intent answered
		// to most of the chunk still in flight.
		lag := k % (chunk - 1)
		waitMsgs[schemas.SyncResult](t, n.js, schemas.StreamResults, allResults, len(seqs)-lag, 60*time.Second)
		n.proc.Signal(syscall.SIGKILL)
		n.proc.Wait(30 * time.Second)
		n.start()
	}

	// Settle before counting: a sentinel's result, every intent's result,
	// every pod at its newest intent.
	seqs[n.publish("kb-sentinel", podJSON("kb-sentinel", 1, "Never", "exit 0"))] = "kb-sentinel"
	n.results("kb-sentinel", 1)
	results := waitMsgs[schemas.SyncResult](t, n.js, schemas.StreamResults, allResults, len(seqs), 120*time.Second)
	checkOneResultEach(t, results, seqs)
	for _, p := range pods {
		if !p.deleted {
			n.waitStatus(p.uid, 60*time.Second, func(st *schemas.PodStatus) bool {
				return st.Revision == p.revision && (p.crash || st.Phase == schemas.PhaseRunning)
			})
		}
	}
	// Events are published after the results they go with: look until the
	// ledger adds up or the time is out.
	cri := criClient(t, n)
	var problems []string
	poll.Until(t, 30*time.Second, func() string {
		return fmt.Sprintf("the events to add up; %d problems:\n%s", len(problems), strings.Join(problems, "\n"))
	}, func() bool {
		evs := readMsgs[schemas.LifecycleEvent](t, n.js, schemas.StreamEvents, "jetlet.event.n1.>")
		held, err := cri.ListContainers(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		problems = ledgerProblems(evs, pods, held)
		return len(problems) == 0
	})
}

// ledgerProblems says where the events of a burst over pods do not add up,
// given the containers the runtime holds.
func ledgerProblems(evs []schemas.LifecycleEvent, pods []*burstPod, held []*runtimeapi.Container) []string {
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	type instance struct {
		uid, container string
		started, died  int
		startedAt      time.Time
		killed         []string // ContainerKilled reasons
	}
	ids := map[string]int{}
	instances := map[string]*instance{} // by container id
	for _, ev := range evs {
		if ids[ev.ID]++; ids[ev.ID] == 2 {
			report("event id %s stored twice", ev.ID)
		}
		if ev.ContainerID == "" {
			continue
		}
		in := instances[ev.ContainerID]
		if in == nil {
			in = &instance{uid: ev.UID, container: ev.Container}
			instances[ev.ContainerID] = in
		}
		switch ev.Type {
		case schemas.EventContainerStarted:
			in.started++
			in.startedAt = ev.Time
		case schemas.EventContainerDied:
			in.died++
		case schemas.EventContainerKilled:
			in.killed = append(in.killed, ev.Reason)
		}
	}
	// Instances known only from other events (created, removed) never ran.
	for id, in := range instances {
		if in.started == 0 && in.died == 0 {
			delete(instances, id)
		}
	}
	// Per pod: how many instances started, and the newest, the only one that
	// may still run.
	starts, newest := map[string][]string{}, map[string]string{}
	for id, in := range instances {
		starts[in.uid] = append(starts[in.uid], fmt.Sprintf("%.12s (started %d, died %d, killed %v)", id, in.started, in.died, in.killed))
		if cur, ok := newest[in.uid]; !ok || in.startedAt.After(instances[cur].startedAt) {
			newest[in.uid] = id
		}
	}
	deleted := map[string]bool{}
	for _, p := range pods {
		deleted[p.uid] = p.deleted
		if !p.crash && len(starts[p.uid]) > p.specs {
			report("pod %s: %d containers ran for %d container specs: %s", p.uid, len(starts[p.uid]), p.specs, strings.Join(starts[p.uid], ", "))
		}
	}
	for id, in := range instances {
		if in.started != 1 {
			report("pod %s container %s (%s): %d ContainerStarted, want 1", in.uid, in.container, id, in.started)
		}
		exited := newest[in.uid] != id || deleted[in.uid]
		switch {
		case in.died > 1:
			report("pod %s container %s (%s): %d ContainerDied, want 1", in.uid, in.container, id, in.died)
		case exited && in.died == 0:
			report("pod %s container %s (%s) exited (replaced, or its pod deleted) but has no ContainerDied", in.uid, in.container, id)
		}
	}
	for _, c := range held {
		if c.State != runtimeapi.ContainerState_CONTAINER_CREATED && instances[c.Id] == nil {
			report("pod %s container %s (%s, %s) ran but has no ContainerStarted", c.Labels[crilabels.LabelPodUID], c.GetMetadata().GetName(), c.Id, c.State)
		}
	}
	slices.Sort(problems)
	return problems
}

// criClient connects to the node's embedded runtime.
func criClient(t testing.TB, n *node) *runtime.Client {
	t.Helper()
	client, err := runtime.New(runtime.Config{Endpoint: "unix://" + n.dataDir + "/cri.sock"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := client.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	return client
}
