package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

const (
	burst = 1000 // intents per run, at least
	rate  = 200  // intents per second offered
)

// fault breaks the cluster while load runs. It may wait for the load to reach
// a count; the load goes on until the fault returns and burst intents are
// stored.
type fault func(r *rig, load *load)

// TestLeaderKill kills the intents stream's leader: the client commands
// started just after ride out the election.
func TestLeaderKill(t *testing.T) {
	runFault(t, killLeader(schemas.StreamIntents, (*rig).clientRidesOut))
}

// killLeader is the fault that kills stream's leader once a third of the
// burst is stored, runs meanwhile, and restarts the server once the burst
// is stored.
func killLeader(stream string, meanwhile func(*rig)) fault {
	return func(r *rig, load *load) {
		<-load.reached(burst / 3)
		leader := r.leader(stream)
		r.cluster.Kill(leader)
		r.t.Logf("killed %s, the %s leader, after %d intents", r.cluster.Servers[leader].Name, stream, load.count())
		meanwhile(r)
		<-load.reached(burst)
		r.cluster.Restart(leader)
		r.cluster.WaitHealthy(time.Minute)
	}
}

func TestRollingRestart(t *testing.T) {
	runFault(t, func(r *rig, load *load) {
		<-load.reached(burst / 10)
		for i := range r.cluster.Servers {
			r.cluster.Stop(i)
			r.cluster.Restart(i)
			r.cluster.WaitHealthy(time.Minute)
		}
	})
}

func TestPartition(t *testing.T) {
	runFault(t, func(r *rig, load *load) {
		<-load.reached(burst / 3)
		leader := r.leader(schemas.StreamIntents)
		r.cluster.Cut(leader)
		t.Logf("cut %s, the %s leader, off after %d intents", r.cluster.Servers[leader].Name, schemas.StreamIntents, load.count())
		// Clients of the cut server wait for it: the cut lasts while the
		// load runs, 5 s at most.
		select {
		case <-load.reached(burst):
		case <-time.After(5 * time.Second):
		}
		r.cluster.Heal(leader)
		r.cluster.WaitHealthy(time.Minute)
	})
}

// clientRidesOut runs `jetlet apply --wait` of a new pod and `jetlet get
// pods` at once, while the cluster elects leaders after a server loss (the
// server's URL first in --nats-url): each must move to a live server and
// retry until it succeeds, within its own deadline.
func (r *rig) clientRidesOut() {
	t := r.t
	dir := t.TempDir()
	manifest := filepath.Join(dir, "pod.yaml")
	uid := fmt.Sprintf("cli-%d", time.Now().UnixNano())
	pod := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s, uid: %s}\nspec:\n  containers: [{name: app, image: busybox:1.36, command: [sleep, \"86400\"]}]\n", uid, uid)
	if err := os.WriteFile(manifest, []byte(pod), 0o600); err != nil {
		t.Fatal(err)
	}
	auth := []string{"--nats-url", r.cluster.URLs(), "--nats-user", jetletUser, "--nats-password", jetletPassword}
	for _, args := range [][]string{
		append([]string{"apply", "-f", manifest, "--node", nodeName(0), "--wait", "--timeout", "90s"}, auth...),
		append([]string{"get", "pods", "--node", nodeName(0)}, auth...),
	} {
		started := time.Now()
		cmd := exec.Command(jetlettest.Binary(t), args...)
		out, err := cmd.CombinedOutput()
		t.Logf("jetlet %s: %v after %v\n%s", args[0], err, time.Since(started).Round(time.Millisecond), out)
		if err != nil {
			t.Errorf("jetlet %s during the election: %v", strings.Join(args[:2], " "), err)
		}
	}
}

// TestFreeze stops the results stream's leader (SIGSTOP) for 10 s: its
// clients must leave it (jetlet pings every second) and JetStream must elect
// another leader, rather than everyone waiting for the server to wake. Pods
// applied meanwhile start without waiting for their results to be stored.
func TestFreeze(t *testing.T) {
	runFault(t, func(r *rig, load *load) {
		<-load.reached(burst / 3)
		leader := r.leader(schemas.StreamResults)
		r.cluster.Freeze(leader)
		t.Logf("froze %s, the %s leader, after %d intents", r.cluster.Servers[leader].Name, schemas.StreamResults, load.count())
		thaw := time.After(10 * time.Second) // the fault's length, not a wait for anything
		r.startPodsDuringFault()
		<-thaw
		r.cluster.Thaw(leader)
		r.cluster.WaitHealthy(time.Minute)
	})
}

// TestResultsLeaderKill kills the results stream's leader: results wait for
// a new one, while pods applied meanwhile start.
func TestResultsLeaderKill(t *testing.T) {
	runFault(t, killLeader(schemas.StreamResults, (*rig).startPodsDuringFault))
}

// startPodsDuringFault applies a new pod on each node; the run checks that
// each comes up and reports how long after its intent was stored its
// container started (newPodsStarted).
func (r *rig) startPodsDuringFault() {
	for i := range nodes {
		r.newPodsApplied++
		key := podKey{nodeName(i), fmt.Sprintf("%s-new-%02d", nodeName(i), r.newPodsApplied)}
		r.newPods = append(r.newPods, key)
		r.publishRevision(context.Background(), i, key, 1, "fault")
	}
}

// newPodsStarted reports, for each pod startPodsDuringFault applied, the
// time from its intent stored to its container started (the event's own
// time, taken by jetlet) and to its result stored; it fails the test for a
// pod whose container's start is not stored within a minute.
func (r *rig) newPodsStarted(intents []stored, byIntent map[uint64][]result) {
	started := map[string]time.Time{}
	poll.Until(r.t, time.Minute, func() string { return fmt.Sprintf("a ContainerStarted event of each of %v", r.newPods) }, func() bool {
		for _, m := range r.events.read(r.t) {
			var ev schemas.LifecycleEvent
			if err := json.Unmarshal(m.data, &ev); err != nil {
				r.t.Fatalf("event %d: %v", m.seq, err)
			}
			if ev.Type == schemas.EventContainerStarted {
				started[ev.UID] = ev.Time
			}
		}
		return !slices.ContainsFunc(r.newPods, func(key podKey) bool { return started[key.uid].IsZero() })
	})
	var report []string
	for _, key := range r.newPods {
		i := slices.IndexFunc(intents, func(in stored) bool { return in.subject == "jetlet.intent."+key.node+"."+key.uid })
		if i < 0 {
			r.t.Errorf("no intent stored for %s/%s", key.node, key.uid)
			continue
		}
		at := started[key.uid]
		res := byIntent[intents[i].seq][0]
		report = append(report, fmt.Sprintf("%s: started %v, result stored %v", key.node,
			at.Sub(intents[i].time).Round(time.Millisecond), res.time.Sub(intents[i].time).Round(time.Millisecond)))
	}
	r.newPods = nil
	r.t.Logf("pods applied during the fault, after their intent was stored: %s", strings.Join(report, "; "))
}

// runFault repeats the fault JETLET_CHAOS_RUNS times on one cluster and
// checks each run; without the variable the test is skipped.
func runFault(t *testing.T, f fault) {
	s := os.Getenv("JETLET_CHAOS_RUNS")
	if s == "" {
		t.Skip("chaos tests run with JETLET_CHAOS_RUNS=N (CI's chaos stage: 1)")
	}
	runs, err := strconv.Atoi(s)
	if err != nil || runs < 1 {
		t.Fatalf("JETLET_CHAOS_RUNS=%q: want a positive number", s)
	}
	r := newRig(t)
	var pauses []time.Duration
	for run := range runs {
		ok := t.Run(fmt.Sprintf("run%d", run+1), func(t *testing.T) {
			r.t = t
			pauses = append(pauses, r.run(run, f))
		})
		if !ok {
			break
		}
	}
	if len(pauses) > 0 {
		t.Logf("longest pause in results per run: %v (max %v)", pauses, slices.Max(pauses))
	}
}

// run runs the fault under load, lets the cluster settle and checks the
// outcome; it returns the longest pause in results.
func (r *rig) run(run int, f fault) time.Duration {
	t := r.t
	fromSeq := r.lastSeq(schemas.StreamIntents)
	started := time.Now()
	load := startLoad(r, fmt.Sprintf("run%d", run))
	f(r, load)
	load.finish()
	t.Logf("%d intents offered", load.count())
	for _, key := range r.newPods { // the load's goroutine, owning revision, is done
		r.revision[key] = 1
	}

	// Settle: each node's sentinel, then every intent of the run answered.
	for i := range nodes {
		r.publish(t.Context(), i, podsPerNode, fmt.Sprintf("sentinel%d", run))
	}
	var unanswered []stored
	var byIntent map[uint64][]result
	poll.Until(t, 2*time.Minute, func() string {
		return fmt.Sprintf("a result for every intent; %d unanswered, first: %s", len(unanswered), describe(unanswered))
	}, func() bool {
		byIntent = r.resultsByIntent()
		unanswered = unanswered[:0]
		for _, in := range r.intents.read(t) {
			if in.seq > fromSeq && len(byIntent[in.seq]) == 0 {
				unanswered = append(unanswered, in)
			}
		}
		return len(unanswered) == 0
	})
	// The sentinels' results are stored after everything their nodes had
	// answered before: a duplicate result would be among them by now.
	intents := r.intentsAfter(fromSeq)
	for _, in := range intents {
		if n := len(byIntent[in.seq]); n != 1 {
			t.Errorf("intent %d (%s) has %d results: %v", in.seq, in.subject, n, byIntent[in.seq])
		}
	}
	r.checkEventsOnce()
	r.waitConverged(time.Minute)
	r.newPodsStarted(intents, byIntent)
	for i, p := range r.procs {
		if p.Exited() {
			t.Errorf("jetlet %s exited", nodeName(i))
		}
	}
	longest, slowest, latency := pauses(intents, byIntent)
	t.Logf("%d intents, each answered once; longest pause in results %v (%s from %s); longest intent-to-result %v (intent %d %s, taken by jetlet %v after it was stored); longest gap between stored intents %v",
		len(intents), longest.length(), longest.node, longest.from.Format("15:04:05.000"),
		latency, slowest.seq, slowest.subject, byIntent[slowest.seq][0].received.Sub(slowest.time), intakeGap(intents[:len(intents)-nodes]))
	r.logWarnings(started)
	return longest.length()
}

// result is a stored result, as the checks need it.
type result struct {
	seq      uint64 // in JETLET_RESULTS
	time     time.Time
	outcome  schemas.Outcome
	received time.Time // when jetlet took the intent (its last delivery)
}

func (r *rig) resultsByIntent() map[uint64][]result {
	out := map[uint64][]result{}
	for _, m := range r.results.read(r.t) {
		var res schemas.SyncResult
		if err := json.Unmarshal(m.data, &res); err != nil {
			r.t.Fatalf("result %d: %v", m.seq, err)
		}
		out[res.IntentSeq] = append(out[res.IntentSeq], result{seq: m.seq, time: m.time, outcome: res.Outcome, received: res.ReceivedAt})
	}
	return out
}

func (r *rig) intentsAfter(seq uint64) []stored {
	var out []stored
	for _, in := range r.intents.read(r.t) {
		if in.seq > seq {
			out = append(out, in)
		}
	}
	return out
}

func describe(intents []stored) string {
	if len(intents) == 0 {
		return "none"
	}
	in := intents[0]
	return fmt.Sprintf("%d %s stored %s", in.seq, in.subject, in.time.Format(time.RFC3339Nano))
}

// checkEventsOnce fails the test for every event id stored twice.
func (r *rig) checkEventsOnce() {
	seen := map[string]uint64{}
	for _, m := range r.events.read(r.t) {
		var ev schemas.LifecycleEvent
		if err := json.Unmarshal(m.data, &ev); err != nil {
			r.t.Fatalf("event %d: %v", m.seq, err)
		}
		if first, dup := seen[ev.ID]; dup {
			r.t.Errorf("event id %s stored twice: sequences %d and %d", ev.ID, first, m.seq)
			continue
		}
		seen[ev.ID] = m.seq
	}
}

// pause is the longest time a node's intents waited while none of its
// results was stored.
type pause struct {
	node     string
	from, to time.Time
}

func (p pause) length() time.Duration { return p.to.Sub(p.from) }

// pauses returns the longest pause of any node, and the intent that waited
// longest for its result and how long.
func pauses(intents []stored, byIntent map[uint64][]result) (longest pause, slowest stored, latency time.Duration) {
	type mark struct {
		at     time.Time
		intent bool
	}
	timeline := map[string][]mark{} // per node
	for _, in := range intents {
		node := nodeOf(in.subject)
		res := byIntent[in.seq][0]
		if d := res.time.Sub(in.time); d > latency {
			latency, slowest = d, in
		}
		timeline[node] = append(timeline[node], mark{in.time, true}, mark{res.time, false})
	}
	for node, marks := range timeline {
		slices.SortStableFunc(marks, func(a, b mark) int { return a.at.Compare(b.at) })
		outstanding := 0
		var since time.Time // last result, or first intent after an idle spell
		for _, m := range marks {
			switch {
			case m.intent:
				if outstanding == 0 {
					since = m.at
				}
				outstanding++
			default:
				if p := (pause{node, since, m.at}); p.length() > longest.length() {
					longest = p
				}
				since = m.at
				outstanding--
			}
		}
	}
	return longest, slowest, latency
}

// intakeGap is the longest time between two intents of the load (the
// sentinels, stored after it, left out): how long JETLET_INTENTS took no
// writes.
func intakeGap(intents []stored) time.Duration {
	var gap time.Duration
	for i := 1; i < len(intents); i++ {
		gap = max(gap, intents[i].time.Sub(intents[i-1].time))
	}
	return gap
}

// nodeOf is the node token of an intent subject, jetlet.intent.<node>.<uid>.
func nodeOf(subject string) string {
	tokens := strings.Split(subject, ".")
	if len(tokens) < 3 {
		return ""
	}
	return tokens[2]
}

// load publishes intents at rate, round-robin over the nodes' pods, until
// finish is called and at least burst are stored.
type load struct {
	mu      sync.Mutex // guards stored and waiters
	stored  int
	waiters map[int][]chan struct{}

	stop chan struct{}
	done chan struct{}
}

func startLoad(r *rig, msgIDPrefix string) *load {
	l := &load{waiters: map[int][]chan struct{}{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(time.Second / rate)
		defer tick.Stop()
		for k := 0; ; k++ {
			select {
			case <-l.stop:
				if k >= burst {
					return
				}
			default:
			}
			<-tick.C
			node := k % nodes
			if !r.publish(context.Background(), node, (k/nodes)%podsPerNode, msgIDPrefix) {
				return
			}
			l.add()
		}
	}()
	return l
}

func (l *load) add() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stored++
	for _, ch := range l.waiters[l.stored] {
		close(ch)
	}
	delete(l.waiters, l.stored)
}

func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stored
}

// reached is closed once n intents are stored.
func (l *load) reached(n int) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := make(chan struct{})
	if l.stored >= n {
		close(ch)
		return ch
	}
	l.waiters[n] = append(l.waiters[n], ch)
	return ch
}

// finish lets the load stop once burst intents are stored, and waits for it.
func (l *load) finish() {
	close(l.stop)
	<-l.done
}

// leader is the index of the server leading stream.
func (r *rig) leader(stream string) int {
	r.t.Helper()
	var i = -1
	poll.Until(r.t, 30*time.Second, poll.Msg("a leader of "+stream), func() bool {
		st, err := r.js.Stream(r.t.Context(), stream)
		if err != nil {
			return false
		}
		info := st.CachedInfo()
		if info.Cluster == nil {
			return false
		}
		i = r.cluster.Index(info.Cluster.Leader)
		return i >= 0
	})
	return i
}

// logWarnings logs what the nodes warned about since the run started: what
// the faults looked like from jetlet.
func (r *rig) logWarnings(since time.Time) {
	for i, p := range r.procs {
		var lines []string
		for _, line := range strings.Split(p.Logs(), "\n") {
			var entry struct {
				Level string    `json:"level"`
				Time  time.Time `json:"time"`
			}
			if json.Unmarshal([]byte(line), &entry) != nil || entry.Time.Before(since) {
				continue
			}
			if entry.Level == "warn" || entry.Level == "error" {
				lines = append(lines, line)
			}
		}
		if len(lines) > 0 {
			r.t.Logf("%s warned %d times; first ones:\n%s", nodeName(i), len(lines), strings.Join(lines[:min(len(lines), 15)], "\n"))
		}
	}
}
