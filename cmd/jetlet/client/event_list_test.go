package client

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

func TestEventsTableJSONAndFilters(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", func(p *corev1.Pod) bool { return p.Name == "crashloop" })
	res := c.run("events")
	wantCode(t, res, 0)
	wantContains(t, "stderr", res.stderr, "No events found.")

	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--wait"), 0)
	wantCode(t, c.run("apply", "-f", examples+"crashloop.yaml", "--wait"), 2)
	wantCode(t, c.run("delete", "default/web", "--wait"), 0)

	res = c.run("events")
	wantCode(t, res, 0)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	// web: 3 on apply, 3 on delete; crashloop: 5 (BackOff last).
	if len(lines) != 1+11 {
		t.Fatalf("%d lines, want a header and 11 events", len(lines))
	}
	for _, want := range []string{
		`(?m)^TIME\s+TYPE\s+POD\s+CONTAINER\s+REASON/EXIT\s+MESSAGE$`,
		`(?m)^\S+\s+SandboxCreated\s+default/web\s+<none>\s+<none>\s+<none>$`,
		`(?m)^\S+\s+ContainerDied\s+default/crashloop\s+app\s+Error, exit 1\s+<none>$`,
		`(?m)^\S+\s+ContainerKilled\s+default/web\s+app\s+PodDeleted\s+<none>$`,
		`(?m)^\S+\s+PodTerminated\s+default/web\s+`,
	} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("events table does not match %s", want)
		}
	}
	if _, err := time.Parse(time.RFC3339, strings.Fields(lines[1])[0]); err != nil {
		t.Errorf("TIME column: %v", err)
	}

	res = c.run("events", "--pod", "default/web", "-o", "json")
	wantCode(t, res, 0)
	rows := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(rows) != 6 {
		t.Fatalf("--pod default/web: %d JSON lines, want 6", len(rows))
	}
	var types []string
	for _, r := range rows {
		var ev schemas.LifecycleEvent
		if err := json.Unmarshal([]byte(r), &ev); err != nil {
			t.Fatalf("line %q: %v", r, err)
		}
		if ev.Pod != "web" || ev.Node != "n1" || ev.Kind != schemas.KindLifecycleEvent {
			t.Errorf("event %+v", ev)
		}
		types = append(types, string(ev.Type))
	}
	if types[0] != "SandboxCreated" || types[5] != "PodTerminated" {
		t.Errorf("types %v", types)
	}

	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--type", "containerdied"}, 1},
		{[]string{"--type", "ContainerStarted", "--node", "n1"}, 2},
		{[]string{"--node", "n2"}, 0},
		{[]string{"--since", "1h"}, 11},
		{[]string{"--since", time.Now().Add(time.Hour).Format(time.RFC3339)}, 0},
		{[]string{"--pod", "crashloop", "--type", "SandboxCreated"}, 1},
	} {
		res := c.run(append([]string{"events", "-o", "json"}, tc.args...)...)
		wantCode(t, res, 0)
		if got := strings.Count(res.stdout, "\n"); got != tc.want {
			t.Errorf("events %v: %d events, want %d", tc.args, got, tc.want)
		}
	}
	uid := regexp.MustCompile(`"uid":"([^"]+)"`).FindStringSubmatch(rows[0])[1]
	res = c.run("events", "--uid", uid, "-o", "wide")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "NODE", "UID", "ATTEMPT", uid)

	res = c.run("events", "--pod", "default/nothere")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "pod default/nothere not found")
}

func TestEventsFollow(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", nil)
	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--wait"), 0)

	f := c.follow("events", "--follow")
	stdout := &f.stdout
	poll.Until(t, 10*time.Second, poll.Msg("the stored events"), func() bool { return strings.Count(stdout.String(), "\n") == 1+3 })

	wantCode(t, c.run("delete", "default/web", "--wait"), 0)
	poll.Until(t, 10*time.Second, poll.Msg("the delete's events"), func() bool { return strings.Contains(stdout.String(), "PodTerminated") })
	f.stop(t)
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 1+6 {
		t.Errorf("%d lines, want a header and 6 events:\n%s", len(lines), stdout.String())
	}
	// Every row lines up under the header.
	col := strings.Index(lines[0], "POD")
	for _, l := range lines[1:] {
		if len(l) < col || !strings.HasPrefix(l[col:], "default/web") {
			t.Errorf("row %q is not aligned under POD at column %d", l, col)
		}
	}
}

// A follow with nothing stored yet prints the header, then what comes, in
// the header's columns.
func TestEventsFollowFromNothing(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", nil)
	f := c.follow("events", "-f", "--type", "PodTerminated")
	stdout := &f.stdout
	poll.Until(t, 10*time.Second, poll.Msg("the header"), func() bool { return strings.HasPrefix(stdout.String(), "TIME") })

	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--wait"), 0)
	wantCode(t, c.run("delete", "default/web", "--wait"), 0)
	poll.Until(t, 10*time.Second, poll.Msg("PodTerminated"), func() bool { return strings.Contains(stdout.String(), "PodTerminated") })
	f.stop(t)
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want a header and the one PodTerminated:\n%s", len(lines), stdout.String())
	}
	for _, col := range []string{"TYPE", "POD", "CONTAINER", "REASON/EXIT"} {
		at := strings.Index(lines[0], col)
		if len(lines[1]) <= at || lines[1][at-1] != ' ' || lines[1][at] == ' ' {
			t.Errorf("the event's cell is not under %s (column %d):\n%s", col, at, stdout.String())
		}
	}
}

// -o cloudevents prints each event as a structured-mode CloudEvent that the
// CloudEvents Go SDK reads and validates as it is.
func TestEventsCloudEvents(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", nil)
	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--wait"), 0)
	res := c.run("events", "-o", "cloudevents")
	wantCode(t, res, 0)
	rows := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(rows) != 3 {
		t.Fatalf("%d lines, want 3 CloudEvents:\n%s", len(rows), res.stdout)
	}
	for _, r := range rows {
		var ce cloudevents.Event
		if err := json.Unmarshal([]byte(r), &ce); err != nil {
			t.Fatalf("the SDK does not read %s: %v", r, err)
		}
		if err := ce.Validate(); err != nil {
			t.Errorf("%s: %v", r, err)
		}
		var ev schemas.LifecycleEvent
		if err := ce.DataAs(&ev); err != nil {
			t.Fatalf("data of %s: %v", r, err)
		}
		if ce.SpecVersion() != "1.0" || ce.ID() != ev.ID || ce.Source() != "jetlet/n1" ||
			ce.Type() != "dev.jetlet."+string(ev.Type) || !ce.Time().Equal(ev.Time) ||
			ce.Subject() != "default/web" || ce.DataContentType() != "application/json" {
			t.Errorf("CloudEvent %s does not match its event %+v", ce, ev)
		}
	}
	// The same attributes as the NATS headers the publisher sets.
	if !regexp.MustCompile(`^\{"specversion":"1.0","id":"[^"]+","source":"jetlet/n1","type":"dev.jetlet.SandboxCreated","time":"[^"]+","subject":"default/web","datacontenttype":"application/json","data":\{"apiVersion":"jetlet.dev/v1",`).MatchString(rows[0]) {
		t.Errorf("first CloudEvent: %s", rows[0])
	}
}
