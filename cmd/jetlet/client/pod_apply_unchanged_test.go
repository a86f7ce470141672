package client

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
)

// webJSON is deploy/examples/web.yaml written otherwise: JSON, keys in
// another order, its namespace and restartPolicy left to their defaults, an
// empty env.
const webJSON = `{"kind":"Pod","apiVersion":"v1",
 "spec":{"containers":[{"command":["sh","-c","trap 'exit 0' TERM; while true; do date; sleep 5 & wait $!; done"],
   "image":"busybox:1.36","name":"app","imagePullPolicy":"IfNotPresent","env":[]}],
   "terminationGracePeriodSeconds":5},
 "metadata":{"labels":{"app":"web"},"name":"web"}}`

func TestApplyUnchangedPublishesNothing(t *testing.T) {
	c := newCluster(t)
	c.heartbeat("n1")

	res := c.run("apply", "-f", examples+"web.yaml")
	wantCode(t, res, 0)

	// The same pod written otherwise is the same desired state.
	res = c.runIn(webJSON, "apply", "-f", "-", "-o", "json")
	wantCode(t, res, 0)
	var out map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("-o json %q: %v", res.stdout, err)
	}
	if out["unchanged"] != true || out["revision"] != float64(1) || out["intentSeq"] != float64(1) || out["name"] != "web" {
		t.Errorf("-o json = %v, want unchanged at revision 1, intent 1", out)
	}
	// --wait has nothing to wait for.
	res = c.run("apply", "-f", examples+"web.yaml", "--wait", "--timeout", "5s")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "pod/default/web unchanged on node n1")
	if strings.Contains(res.stderr, "waiting for") {
		t.Errorf("--wait waited for an unchanged pod: %s", res.stderr)
	}
	if got := len(c.intents()); got != 1 {
		t.Fatalf("%d intents stored, want 1", got)
	}

	// A label and an image changed are published; back to the first is a
	// change again, from the newest.
	changed := strings.Replace(webJSON, `"app":"web"`, `"app":"web","tier":"front"`, 1)
	for i, m := range []string{changed, strings.Replace(changed, "busybox:1.36", "busybox:1.37", 1), webJSON} {
		res = c.runIn(m, "apply", "-f", "-")
		wantCode(t, res, 0)
		wantContains(t, "stdout", res.stdout, "pod/default/web applied on node n1", "revision "+string(rune('2'+i)))
	}
	res = c.runIn(webJSON, "apply", "-f", "-")
	wantContains(t, "stdout", res.stdout, "pod/default/web unchanged on node n1", "revision 4, intent 4")

	// Two documents of one apply naming the same unchanged pod: both unchanged.
	res = c.runIn(webJSON+"\n---\n"+webJSON, "apply", "-f", "-")
	wantCode(t, res, 0)
	if n := strings.Count(res.stdout, "unchanged"); n != 2 {
		t.Errorf("stdout %q: want 2 unchanged", res.stdout)
	}

	// Deleted, the same manifest makes a new pod.
	res = c.run("delete", "default/web")
	wantCode(t, res, 0)
	res = c.run("apply", "-f", examples+"web.yaml")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "pod/default/web applied on node n1", "revision 1")
	if got := len(c.intents()); got != 6 {
		t.Errorf("%d intents stored, want 6", got)
	}

	// One CPU is 1000m.
	limited := strings.Replace(podYAML("q", "app"), `command: ["sh", "-c", "sleep 1000"]`,
		`command: ["sh", "-c", "sleep 1000"]`+"\n    resources: {limits: {cpu: \"1\", memory: 64Mi}}", 1)
	wantCode(t, c.runIn(limited, "apply", "-f", "-"), 0)
	res = c.runIn(strings.Replace(limited, `cpu: "1"`, "cpu: 1000m", 1), "apply", "-f", "-")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "pod/default/q unchanged on node n1")
}

func TestApplyWarnsOfANodeWithNoLiveHeartbeat(t *testing.T) {
	c := newCluster(t)

	res := c.run("apply", "-f", examples+"web.yaml", "--node", "n9")
	wantCode(t, res, 0)
	wantContains(t, "stderr", res.stderr, "warning: node n9 has no live heartbeat in jetlet_nodes (never seen)")
	wantContains(t, "stdout", res.stdout, "pod/default/web applied on node n9")

	// A heartbeat a minute old: late, and --wait says so at once rather
	// than waiting out its timeout.
	kv, err := c.js.KeyValue(t.Context(), schemas.BucketNodes)
	if err != nil {
		t.Fatal(err)
	}
	rec := schemas.NodeRecord{APIVersion: schemas.APIVersion, Kind: schemas.KindNode, Node: "n9",
		StartedAt: time.Now().Add(-time.Hour).UTC(), HeartbeatAt: time.Now().Add(-time.Minute).UTC()}
	if _, err := kv.Put(t.Context(), "n9", mustJSON(t, rec)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res = c.run("apply", "-f", examples+"job.yaml", "--node", "n9", "--wait", "--timeout", "1m")
	wantCode(t, res, exitNodeNotLive)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("--wait took %s for a node that is not live", took)
	}
	wantContains(t, "stderr", res.stderr, "warning: node n9 has no live heartbeat in jetlet_nodes (last heartbeat ", " ago)",
		"pod/default/job applied on node n9", "error: not waiting for pod/default/job: node n9 is not live")
	if got := len(c.intents()); got != 2 {
		t.Errorf("%d intents stored, want 2: the intent waits for the node", got)
	}

	// A live node: no warning.
	c.heartbeat("n9")
	res = c.run("apply", "-f", examples+"web.yaml", "--node", "n9", "--force")
	wantCode(t, res, 0)
	if strings.Contains(res.stderr, "warning") {
		t.Errorf("stderr %q: a warning for a live node", res.stderr)
	}
}
