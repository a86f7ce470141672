package client

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	jc "github.com/jetlet/jetlet/client"
)

func TestHistoryShowsIntentsAndResults(t *testing.T) {
	c := newCluster(t)
	c.heartbeat("n1")
	// Published while no node answers: pending.
	wantCode(t, c.run("apply", "-f", examples+"web.yaml"), 0)
	res := c.run("history", "default/web")
	wantCode(t, res, 0)
	if !regexp.MustCompile(`(?m)^1\s+1\s+apply\s+\S+\s+<pending>\s+<none>\s+<none>\s+<none>$`).MatchString(res.stdout) {
		t.Errorf("a pending intent:\n%s", res.stdout)
	}

	c.startNode("n1", nil)
	stale := `apiVersion: jetlet.dev/v1
kind: PodIntent
revision: 1
pod:
` + indent(podYAML("web", "app"))
	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--wait", "--force"), 0)
	wantCode(t, c.runIn(stale, "apply", "-f", "-", "--wait"), 2)
	wantCode(t, c.run("delete", "default/web", "--wait"), 0)

	res = c.run("history", "default/web")
	wantCode(t, res, 0)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want a heading, a header and 4 intents", len(lines))
	}
	for i, want := range []string{
		`^pod/default/web on node n1 \(uid [0-9a-f-]{36}, phase Terminated\)$`,
		`^INTENT\s+REVISION\s+OP\s+PUBLISHED\s+OUTCOME\s+RECEIVED\s+FINISHED\s+ERROR$`,
		`^1\s+1\s+apply\s+\S+\s+Synced\s+\S+\s+\S+\s+<none>$`,
		`^2\s+2\s+apply\s+\S+\s+Synced\s+`,
		`^3\s+1\s+apply\s+\S+\s+Stale\s+\S+\s+\S+\s+revision 1 is lower than 2, already applied$`,
		`^4\s+3\s+delete\s+\S+\s+Synced\s+`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], want)
		}
	}

	uid := regexp.MustCompile(`uid ([0-9a-f-]{36})`).FindStringSubmatch(lines[0])[1]
	res = c.run("history", "--uid", uid, "-o", "json")
	wantCode(t, res, 0)
	rows := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(rows) != 4 {
		t.Fatalf("%d JSON lines, want 4", len(rows))
	}
	var last jc.HistoryRow
	if err := json.Unmarshal([]byte(rows[3]), &last); err != nil {
		t.Fatal(err)
	}
	if last.IntentSeq != 4 || last.Op != "delete" || last.Outcome != "Synced" || last.UID != uid || last.ReceivedAt == nil || last.Published == nil {
		t.Errorf("last row %+v", last)
	}

	res = c.run("history", "default/other")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "pod default/other not found")
}

func TestHistoryPatchShowsWhatEachRevisionChanged(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", nil)
	first := podYAML("web", "app")
	wantCode(t, c.runIn(first, "apply", "-f", "-", "--wait"), 0)
	second := strings.Replace(first, "busybox:1.36", "busybox:1.37", 1)
	wantCode(t, c.runIn(second, "apply", "-f", "-", "--wait"), 0)
	stale := "apiVersion: jetlet.dev/v1\nkind: PodIntent\nrevision: 1\npod:\n" +
		indent(strings.Replace(first, "sleep 1000", "sleep 5", 1))
	wantCode(t, c.runIn(stale, "apply", "-f", "-", "--wait"), 2)
	third := strings.Replace(second, "  name: web\n", "  name: web\n  labels: {tier: front}\n", 1)
	wantCode(t, c.runIn(third, "apply", "-f", "-", "--wait"), 0)

	res := c.run("history", "default/web", "-p")
	wantCode(t, res, 0)
	_, diffs, found := strings.Cut(res.stdout, "\n\n")
	if !found {
		t.Fatalf("no diffs after the table:\n%s", res.stdout)
	}
	want := `intent 2, revision 2:
--- revision 1 (intent 1)
+++ revision 2 (intent 2)
@@ ` // the image line, in context
	if !strings.HasPrefix(diffs, want) {
		t.Fatalf("diffs start %q, want %q", diffs, want)
	}
	for _, line := range []string{"-    image: busybox:1.36", "+    image: busybox:1.37",
		"intent 3, revision 1:\n--- revision 2 (intent 2)\n+++ revision 1 (intent 3)", // the Stale one, against what ran
		"-    - sleep 1000", "+    - sleep 5",
		"intent 4, revision 3:\n--- revision 2 (intent 2)\n+++ revision 3 (intent 4)", // past the Stale one
		"+  labels:\n+    tier: front",
	} {
		wantContains(t, "stdout", diffs, line)
	}
	if n := strings.Count(diffs, "\n--- "); n != 3 { // the first has none
		t.Errorf("%d diffs, want one for each revision after the first:\n%s", n, diffs)
	}

	res = c.run("history", "default/web", "-p", "-o", "json")
	wantCode(t, res, 0)
	rows := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(rows) != 4 {
		t.Fatalf("%d JSON lines, want 4", len(rows))
	}
	var r1, r2 jc.HistoryRow
	if err := json.Unmarshal([]byte(rows[0]), &r1); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(rows[1]), &r2); err != nil {
		t.Fatal(err)
	}
	if r1.Diff != "" || !strings.Contains(r2.Diff, "+    image: busybox:1.37\n") {
		t.Errorf("first diff %q, second %q", r1.Diff, r2.Diff)
	}
}
