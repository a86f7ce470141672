package client

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// timeline is a few pods' results, each finished at a chosen time, stored
// in JETLET_RESULTS as nodes store them.
type timeline struct {
	c    *cluster
	base time.Time
	seq  uint64
}

// newTimeline starts a timeline 50 seconds ago: results are stored now, so
// every moment of it is within resultLag of when they were stored.
func newTimeline(c *cluster) *timeline {
	return &timeline{c: c, base: time.Now().Add(-50 * time.Second).Truncate(time.Second)}
}

// at is the timeline's moment s seconds in, in RFC 3339.
func (tl *timeline) at(s int) string {
	return tl.base.Add(time.Duration(s) * time.Second).Format(time.RFC3339Nano)
}

// result stores a result of op for the pod, finished s seconds in, with its
// status in phase (none when phase is ""); waiting, when set, is the reason
// its container waits.
func (tl *timeline) result(s int, node, uid, name string, op schemas.Op, phase schemas.PodPhase, waiting string) {
	tl.c.t.Helper()
	tl.seq++
	finished := tl.base.Add(time.Duration(s) * time.Second)
	res := schemas.SyncResult{
		APIVersion: schemas.APIVersion, Kind: schemas.KindSyncResult, Node: node, UID: uid, Namespace: "default", Name: name,
		IntentSeq: tl.seq, Revision: 1, Op: op, Outcome: schemas.OutcomeSynced,
		ReceivedAt: finished.Add(-time.Millisecond), FinishedAt: finished,
	}
	if phase != "" {
		cs := schemas.ContainerStatus{Name: "app", Image: "busybox:1.36", State: schemas.ContainerRunning, Ready: true, Started: true}
		if waiting != "" {
			cs = schemas.ContainerStatus{Name: "app", Image: "busybox:1.36", State: schemas.ContainerWaiting, Reason: waiting}
		}
		res.Status = &schemas.PodStatus{UID: uid, Namespace: "default", Name: name, Node: node, Revision: 1, IntentSeq: tl.seq,
			Phase: phase, Containers: []schemas.ContainerStatus{cs}, ObservedAt: finished}
	}
	tl.publish(schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}.Result(node, uid), res)
}

// publish stores v, as JSON, on subj.
func (tl *timeline) publish(subj string, v any) {
	tl.c.t.Helper()
	if _, err := tl.c.js.Publish(tl.c.t.Context(), subj, mustJSON(tl.c.t, v)); err != nil {
		tl.c.t.Fatal(err)
	}
}

// wantConsumers waits until the streams' consumers are before again: every
// read deleted its own.
func (tl *timeline) wantConsumers(before []string) {
	tl.c.t.Helper()
	var after []string
	poll.Until(tl.c.t, 5*time.Second, func() string {
		return fmt.Sprintf("consumers left: %v, before: %v", after, before)
	}, func() bool { after = tl.c.consumers(); return slices.Equal(after, before) })
}

func TestGetPodsAtListsThePodsOfThatMoment(t *testing.T) {
	c := newCluster(t)
	before := c.consumers()
	tl := newTimeline(c)
	tl.result(1, "n1", "uid-web", "web", schemas.OpApply, schemas.PhasePending, "ContainerCreating")
	tl.result(2, "n1", "uid-db", "db", schemas.OpApply, schemas.PhaseRunning, "")
	tl.result(10, "n1", "uid-web", "web", schemas.OpApply, schemas.PhaseRunning, "")
	tl.result(20, "n1", "uid-db", "db", schemas.OpDelete, "", "")
	tl.result(30, "n2", "uid-cron", "cron", schemas.OpApply, schemas.PhaseRunning, "")
	tl.result(40, "n2", "uid-cron", "cron", schemas.OpApply, schemas.PhaseTerminated, "")

	// get pods --at TIME: the table, one row per pod listed.
	table := func(args ...string) []string {
		t.Helper()
		res := c.run(append([]string{"get", "pods"}, args...)...)
		wantCode(t, res, 0)
		lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
		if !regexp.MustCompile(`^NAMESPACE\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+NODE$`).MatchString(lines[0]) {
			t.Fatalf("header %q", lines[0])
		}
		return lines[1:]
	}
	wantRows := func(got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("rows %q, want %d", got, len(want))
		}
		for i, w := range want {
			if !regexp.MustCompile(w).MatchString(got[i]) {
				t.Errorf("row %q does not match %s", got[i], w)
			}
		}
	}

	wantRows(table("--at", tl.at(5)),
		`^default\s+db\s+1/1\s+Running\s+0\s+\S+\s+n1$`,
		`^default\s+web\s+0/1\s+ContainerCreating\s+0\s+\S+\s+n1$`)
	wantRows(table("--at", tl.at(15)),
		`^default\s+db\s+1/1\s+Running\s+`,
		`^default\s+web\s+1/1\s+Running\s+`)
	// db deleted: listed only with -a, as Terminated.
	wantRows(table("--at", tl.at(35)),
		`^default\s+cron\s+1/1\s+Running\s+0\s+\S+\s+n2$`,
		`^default\s+web\s+1/1\s+Running\s+`)
	wantRows(table("--at", tl.at(35), "-a"),
		`^default\s+cron\s+`,
		`^default\s+db\s+0/0\s+Terminated\s+`,
		`^default\s+web\s+`)
	// cron Terminated at 40; --node keeps to n1's.
	wantRows(table("--at", tl.at(45)), `^default\s+web\s+1/1\s+Running\s+`)
	wantRows(table("--at", tl.at(35), "--node", "n2"), `^default\s+cron\s+`)

	res := c.run("get", "pods", "--at", tl.at(35), "-o", "json")
	wantCode(t, res, 0)
	var l list[schemas.PodStatus]
	if err := json.Unmarshal([]byte(res.stdout), &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 2 || l.Items[0].Name != "cron" || l.Items[1].Name != "web" || l.Items[1].Phase != schemas.PhaseRunning {
		t.Errorf("items %+v", l.Items)
	}

	// A duration ago: an hour ago there were none yet.
	res = c.run("get", "pods", "--at", "1h")
	wantCode(t, res, 0)
	wantContains(t, "stderr", res.stderr, "No pods found in namespace default")

	res = c.run("get", "pods", "--at", "yesterday")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, `--at "yesterday": want a duration ago`)
	wantCode(t, c.run("get", "pods", "--at", "10m", "-w"), 1)

	tl.wantConsumers(before)
}

// event stores a lifecycle event of the pod that happened s seconds in.
func (tl *timeline) event(s int, node, uid, name string, typ schemas.EventType, container string) {
	tl.c.t.Helper()
	ev := schemas.LifecycleEvent{
		APIVersion: schemas.APIVersion, Kind: schemas.KindLifecycleEvent, ID: fmt.Sprintf("%s.%d", uid, s), Type: typ,
		Node: node, UID: uid, Namespace: "default", Pod: name, Container: container,
		Time: tl.base.Add(time.Duration(s) * time.Second),
	}
	tl.publish(schemas.Subjects{Prefix: schemas.DefaultSubjectPrefix}.Event(node, uid, typ), ev)
}

func TestDescribePodAtShowsItsStatusAndEventsThen(t *testing.T) {
	c := newCluster(t)
	before := c.consumers()
	tl := newTimeline(c)
	tl.result(1, "n1", "uid-web", "web", schemas.OpApply, schemas.PhasePending, "ContainerCreating")
	tl.event(2, "n1", "uid-web", "web", schemas.EventSandboxCreated, "")
	tl.event(3, "n1", "uid-web", "web", schemas.EventContainerStarted, "app")
	tl.result(4, "n1", "uid-web", "web", schemas.OpApply, schemas.PhaseRunning, "")
	tl.event(20, "n1", "uid-web", "web", schemas.EventContainerDied, "app")
	tl.result(20, "n1", "uid-web", "web", schemas.OpDelete, "", "")
	// Now: deleted, its status Terminated.
	c.putStatus(schemas.PodStatus{UID: "uid-web", Namespace: "default", Name: "web", Node: "n1", Revision: 1, IntentSeq: 3,
		Phase: schemas.PhaseTerminated, ObservedAt: tl.base.Add(20 * time.Second)})

	res := c.run("describe", "pod", "default/web", "--at", tl.at(1))
	wantCode(t, res, 0)
	wantFields(t, res.stdout, "Status: ContainerCreating", "Phase: Pending", "Intent: 1")
	wantContains(t, "stdout", res.stdout, "Events:\n  <none>")

	res = c.run("describe", "pod", "default/web", "--at", tl.at(10))
	wantCode(t, res, 0)
	wantFields(t, res.stdout, "Status: Running", "Phase: Running", "Intent: 2", "Ready: true")
	if !regexp.MustCompile(`(?s)Events:\n\s+AGE.*\n\s+8s\s+SandboxCreated\s+<none>.*\n\s+7s\s+ContainerStarted\s+app\s+[^\n]*\n$`).MatchString(res.stdout) {
		t.Errorf("the events up to then, aged to then:\n%s", res.stdout)
	}
	if strings.Contains(res.stdout, "ContainerDied") || strings.Contains(res.stdout, "Deleted:") {
		t.Errorf("what came later shows:\n%s", res.stdout)
	}

	res = c.run("describe", "pod", "default/web", "--at", tl.at(30))
	wantCode(t, res, 0)
	wantFields(t, res.stdout, "Phase: Terminated", "Deleted: by intent 3")
	wantContains(t, "stdout", res.stdout, "ContainerDied")

	// Before its first result, it had no status.
	res = c.run("describe", "pod", "default/web", "--at", "1h")
	wantCode(t, res, 0)
	wantFields(t, res.stdout, "Status: no status yet")

	tl.wantConsumers(before)
}

// wantFields checks that describe's output has each "Field: value" line,
// however its columns are aligned.
func wantFields(t *testing.T, out string, fields ...string) {
	t.Helper()
	for _, f := range fields {
		name, value, _ := strings.Cut(f, ": ")
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `:\s+` + regexp.QuoteMeta(value) + `$`).MatchString(out) {
			t.Errorf("no line %q in:\n%s", f, out)
		}
	}
}
