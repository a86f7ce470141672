package client

import (
	"encoding/json"
	"regexp"
	"testing"
)

func TestDeleteByNameAndUID(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", nil)
	res := c.run("apply", "-f", examples+"web.yaml", "--wait")
	wantCode(t, res, 0)
	uid := regexp.MustCompile(`uid ([0-9a-f-]{36})`).FindStringSubmatch(res.stdout)[1]

	res = c.run("delete", "default/web", "--wait", "--grace", "0")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "pod/default/web: Synced (node n1, uid "+uid+", revision 2, intent 2", "KillContainer", "RemovePodSandbox")
	wantContains(t, "stderr", res.stderr, "pod/default/web delete requested on node n1", "PodTerminated")
	got := c.intents()
	if len(got) != 2 {
		t.Fatalf("%d intents, want 2", len(got))
	}
	del := got[1].body
	if del["op"] != "delete" || del["gracePeriodSeconds"] != float64(0) || del["revision"] != float64(2) || got[1].podMeta("uid") != uid {
		t.Errorf("delete intent %v", del)
	}
	if pod := del["pod"].(map[string]any); len(pod) != 1 {
		t.Errorf("a delete carries metadata only, got %v", pod)
	}

	// Gone now: a second delete says so.
	res = c.run("delete", "web")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "pod default/web is already deleted on node n1 (intent 2 deleted it)")
	wantCode(t, c.run("delete", "web", "--ignore-not-found"), 0)

	// Applied again: a new pod, with a new uid.
	res = c.run("apply", "-f", examples+"web.yaml", "-o", "json")
	wantCode(t, res, 0)
	var out map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil || out["uid"] == uid {
		t.Fatalf("re-apply after delete: %v %v", err, out)
	}
	res = c.run("delete", "--uid", out["uid"].(string), "-o", "json")
	wantCode(t, res, 0)
	var printed map[string]any // not out: decoding into it would keep the apply's fields
	if err := json.Unmarshal([]byte(res.stdout), &printed); err != nil || printed["op"] != "delete" || printed["name"] != "web" || printed["revision"] != float64(2) {
		t.Errorf("delete -o json: %v %v", err, printed)
	}
}

func TestDeleteMissingPod(t *testing.T) {
	c := newCluster(t)
	res := c.run("delete", "default/nothere")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "pod default/nothere not found on any node: no status in jetlet_status and no intent in JETLET_INTENTS")
	res = c.run("delete", "--uid", "nope", "--node", "n1")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "pod with uid nope not found on node n1")
	wantCode(t, c.run("delete", "default/nothere", "--ignore-not-found"), 0)
	if n := len(c.intents()); n != 0 {
		t.Errorf("%d intents published for a missing pod", n)
	}
}

// A name is unique on a node, not across nodes: delete, logs and exec of a
// name on several ask which one is meant, none picks one.
func TestANameOnSeveralNodesNeedsANode(t *testing.T) {
	c := newCluster(t)
	c.heartbeat("n1")
	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--node", "n1"), 0)
	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--node", "n2"), 0)
	for _, tc := range []struct {
		cmd  string
		res  cliResult
		code int // exec's own failures are 125, its command's codes the rest
	}{
		{"delete", c.run("delete", "default/web"), 1},
		{"logs", c.run("logs", "default/web"), 1},
		{"exec", c.exec("default/web", "--", "true"), 125},
	} {
		wantCode(t, tc.res, tc.code)
		wantContains(t, "stderr of "+tc.cmd, tc.res.stderr, "pod default/web exists on nodes n1, n2; pick one with --node")
	}
	// With --node, logs asks that node (no jetlet answers for n2 here).
	res := c.run("logs", "default/web", "--node", "n2")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "node n2 of pod default/web does not answer")
	res = c.run("delete", "default/web", "--node", "n2")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "pod/default/web delete requested on node n2", "revision 2, intent 3")
}
