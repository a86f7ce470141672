package client

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/consumer/status"
	"github.com/jetlet/jetlet/schemas"
)

// TestNodeLifecycle: a live node is Ready; one whose heartbeat is late, or
// expired while it has pods, is NotReady; one that stopped cleanly is
// Stopped. The pods of a node that is not Ready show as Unknown unless they
// are finished, and their stored status is left as it is. node remove
// refuses a live node and removes a retired one's statuses and record.
func TestNodeLifecycle(t *testing.T) {
	c := newCluster(t)
	kv, err := c.js.KeyValue(t.Context(), schemas.BucketNodes)
	if err != nil {
		t.Fatal(err)
	}
	c.heartbeat("live")
	late, _ := json.Marshal(schemas.NodeRecord{APIVersion: schemas.APIVersion, Kind: schemas.KindNode, Node: "late",
		StartedAt: time.Now().Add(-time.Hour), HeartbeatAt: time.Now().Add(-5 * status.HeartbeatPeriod)})
	if _, err := kv.Put(t.Context(), "late", late); err != nil {
		t.Fatal(err)
	}
	c.heartbeat("stopped")
	if err := kv.Delete(t.Context(), "stopped"); err != nil { // as a clean stop does
		t.Fatal(err)
	}
	running := []schemas.ContainerStatus{{Name: "app", State: schemas.ContainerRunning, Ready: true}}
	for _, st := range []schemas.PodStatus{
		{UID: "u1", Namespace: "default", Name: "a", Node: "live", Phase: schemas.PhaseRunning, Containers: running},
		{UID: "u2", Namespace: "default", Name: "b", Node: "late", Phase: schemas.PhaseRunning, Containers: running},
		{UID: "u3", Namespace: "default", Name: "c", Node: "stopped", Phase: schemas.PhaseRunning, Containers: running},
		{UID: "u4", Namespace: "default", Name: "d", Node: "lost", Phase: schemas.PhasePending},
		{UID: "u5", Namespace: "default", Name: "e", Node: "lost", Phase: schemas.PhaseSucceeded},
	} {
		st.ObservedAt = time.Now()
		c.putStatus(st)
	}

	res := c.run("get", "nodes")
	wantCode(t, res, 0)
	for _, want := range []string{
		`late\s+NotReady\s+0\s+\S*\s+\S*\s+60m\s+\d+s ago`,
		`live\s+Ready\s+0\s+fake 0.1\s+test\s+60m\s+\d+s ago`,
		`lost\s+NotReady\s+2\s.*\sexpired`,
		`stopped\s+Stopped\s+1\s.*\sdeleted \d+s ago`,
	} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("get nodes does not match %s", want)
		}
	}
	res = c.run("get", "pods")
	wantCode(t, res, 0)
	for _, want := range []string{`a\s+1/1\s+Running\s`, `b\s+1/1\s+Unknown\s`, `c\s+1/1\s+Unknown\s`, `d\s+0/0\s+Unknown\s`, `e\s+0/0\s+Succeeded\s`} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("get pods does not match %s", want)
		}
	}
	res = c.run("get", "pods", "--node", "late", "-o", "json")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, `"phase": "Running"`)

	wantCode(t, c.run("node", "remove", "live"), 1)
	res = c.run("node", "remove", "lost")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "node lost removed: 2 status keys")
	res = c.run("node", "remove", "stopped")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "node stopped removed: 1 status keys, node record")
	res = c.run("get", "nodes")
	if strings.Contains(res.stdout, "lost") || strings.Contains(res.stdout, "stopped") {
		t.Errorf("removed nodes still listed:\n%s", res.stdout)
	}
	res = c.run("get", "pods")
	if regexp.MustCompile(`\s[cde]\s`).MatchString(res.stdout) {
		t.Errorf("the removed nodes' pods are still listed:\n%s", res.stdout)
	}
	wantContains(t, "stderr", c.run("node", "remove", "lost").stderr, "node lost not found")
}
