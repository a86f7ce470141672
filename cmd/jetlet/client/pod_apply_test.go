package client

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/schemas"
)

const examples = "../../../deploy/examples/"

// examplesDir is examples as an absolute path, for the tests that start
// jetlet run in a directory of its own.
func examplesDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(examples)
	if err != nil {
		t.Fatal(err)
	}
	return dir + "/"
}

func TestApplyPublishesAnIntentAndReusesTheUID(t *testing.T) {
	c := newCluster(t)
	c.heartbeat("n1")

	res := c.run("apply", "-f", examples+"web.yaml")
	wantCode(t, res, 0)
	re := regexp.MustCompile(`^pod/default/web applied on node n1 \(uid ([0-9a-f-]{36}), revision 1, intent 1\)\n$`)
	m := re.FindStringSubmatch(res.stdout)
	if m == nil {
		t.Fatalf("stdout %q does not match %s", res.stdout, re)
	}
	uid := m[1]

	// Applied again unchanged: nothing published. Forced: the same pod,
	// the next revision.
	res = c.run("apply", "-f", examples+"web.yaml")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "pod/default/web unchanged on node n1 (uid "+uid+", revision 1, intent 1)")
	res = c.run("apply", "-f", examples+"web.yaml", "--force")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "(uid "+uid+", revision 2, intent 2)")

	got := c.intents()
	if len(got) != 2 {
		t.Fatalf("%d intents stored, want 2", len(got))
	}
	for i, in := range got {
		if in.subject != "jetlet.intent.n1."+uid {
			t.Errorf("intent %d subject %q", i, in.subject)
		}
		if in.msgID == "" {
			t.Errorf("intent %d has no Nats-Msg-Id", i)
		}
		if in.podMeta("uid") != uid || in.podMeta("namespace") != "default" || in.podMeta("name") != "web" {
			t.Errorf("intent %d metadata: %v", i, in.body["pod"])
		}
		if in.body["kind"] != "PodIntent" || in.body["revision"] != float64(i+1) {
			t.Errorf("intent %d envelope: kind %v revision %v", i, in.body["kind"], in.body["revision"])
		}
	}
	// The node would accept it.
	if _, err := schemas.DecodeIntent(mustJSON(t, got[1].body), schemas.IntentTarget{Node: "n1", UID: uid}); err != nil {
		t.Errorf("published intent does not decode: %v", err)
	}
}

func TestApplyTakesUIDAndRevisionFromStatus(t *testing.T) {
	c := newCluster(t)
	c.heartbeat("n1")
	c.putStatus(schemas.PodStatus{UID: "abc-123", Namespace: "default", Name: "web", Node: "n1", Revision: 7, Phase: schemas.PhaseRunning, ObservedAt: time.Now()})
	res := c.run("apply", "-f", examples+"web.yaml")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "(uid abc-123, revision 8, intent 1)")

	// A pod naming its uid: one above the status (7) and the intent (8).
	withUID := strings.Replace(podYAML("web", "app"), "name: web\n", "name: web\n  uid: abc-123\n", 1)
	res = c.runIn(withUID, "apply", "-f", "-")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "(uid abc-123, revision 9, intent 2)")

	// A deleted pod of the same name is not revived: a new uid.
	c.putStatus(schemas.PodStatus{UID: "abc-123", Namespace: "default", Name: "other", Node: "n1", Revision: 9, Phase: schemas.PhaseTerminated, ObservedAt: time.Now()})
	res = c.runIn(podYAML("other", "app"), "apply", "-f", "-", "-o", "json")
	wantCode(t, res, 0)
	var out map[string]any
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	if out["uid"] == "abc-123" || out["revision"] != float64(1) || out["name"] != "other" || out["node"] != "n1" {
		t.Errorf("-o json = %v, want a new uid at revision 1", out)
	}
}

func TestApplyMultiDocumentAndPodIntent(t *testing.T) {
	c := newCluster(t)
	manifest := podYAML("a", "app") + "---\n# only a comment\n---\n" + podYAML("b", "app") + "---\n" + `apiVersion: jetlet.dev/v1
kind: PodIntent
revision: 40
pod:
  metadata: {name: c, namespace: batch, uid: fixed-uid}
  spec:
    containers: [{name: app, image: busybox:1.36, command: [sh, -c, "exit 0"]}]
`
	res := c.runIn(manifest, "apply", "-f", "-", "--node", "n2")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout,
		"pod/default/a applied on node n2 (uid ", "pod/default/b applied on node n2 (uid ",
		"pod/batch/c applied on node n2 (uid fixed-uid, revision 40, intent 3)")
	if got := len(c.intents()); got != 3 {
		t.Errorf("%d intents, want 3", got)
	}

	// JSON input, a pod naming its node.
	res = c.runIn(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"nodeName":"n3","containers":[{"name":"app","image":"busybox","command":["true"],"resources":{"limits":{"memory":1000000000}}}]}}`,
		"apply", "-f", "-")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "pod/default/j applied on node n3")
}

func TestApplyRejectsAnInvalidManifestBeforePublishing(t *testing.T) {
	c := newCluster(t)
	c.heartbeat("n1")
	bad := strings.Replace(podYAML("bad", "app"), "image: busybox:1.36", "image: \"\"", 1) +
		"    volumeMounts: [{name: data, mountPath: /data}]\n  volumes:\n  - name: data\n    persistentVolumeClaim: {claimName: x}\n"
	res := c.runIn(podYAML("good", "app")+"---\n"+bad, "apply", "-f", "-")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "nothing was published", "pod/default/bad (<stdin>, document 2) is invalid",
		"pod.spec.containers[0].image", "persistentVolumeClaim")
	if got := len(c.intents()); got != 0 {
		t.Errorf("%d intents published, want none", got)
	}

	for _, tc := range []struct{ name, input, want string }{
		{"kind", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", `kind "Deployment" is not something jetlet runs`},
		{"no kind", "metadata: {name: x}\n", "no kind"},
		{"yaml", "kind: Pod\n  bad: [\n", "not YAML or JSON"},
		{"empty", "# nothing\n", "no pod in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.runIn(tc.input, "apply", "-f", "-")
			wantCode(t, res, 1)
			wantContains(t, "stderr", res.stderr, tc.want)
		})
	}
}

func TestApplyNeedsANode(t *testing.T) {
	c := newCluster(t)
	res := c.run("apply", "-f", examples+"web.yaml")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "--node is required: no node has a heartbeat")
	c.heartbeat("n1")
	c.heartbeat("n2")
	res = c.run("apply", "-f", examples+"web.yaml")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "--node is required: 2 nodes are live (n1, n2)")
}

func TestApplyWaitPrintsTheResult(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", func(p *corev1.Pod) bool { return p.Name == "crashloop" })

	res := c.run("apply", "-f", examples+"web.yaml", "--wait")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "pod/default/web: Synced (node n1, uid ", "revision 1, intent 1",
		"phase: Running", "ACTION", "CreatePodSandbox", "StartContainer")
	wantContains(t, "stderr", res.stderr, "pod/default/web applied on node n1", "waiting for the result of intent 1",
		"SandboxCreated", "ContainerStarted app")

	res = c.run("apply", "-f", examples+"crashloop.yaml", "--wait", "-o", "json")
	wantCode(t, res, 2)
	var r schemas.SyncResult
	if err := json.Unmarshal([]byte(res.stdout), &r); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	if r.Outcome != schemas.OutcomeFailed || r.IntentSeq != 2 || r.Name != "crashloop" {
		t.Errorf("result %+v", r)
	}
	wantContains(t, "stderr", res.stderr, "ContainerDied app (Error, exit 1)")

	// A retried apply of the very same intent is stored once, and waits for
	// the result already there.
	pinned := strings.Replace(podYAML("pinned", "app"), "name: pinned\n", "name: pinned\n  uid: pinned-1\n", 1)
	pinned = "apiVersion: jetlet.dev/v1\nkind: PodIntent\nrevision: 5\npod:\n" + indent(pinned)
	res = c.runIn(pinned, "apply", "-f", "-", "--wait")
	wantCode(t, res, 0)
	res = c.runIn(pinned, "apply", "-f", "-", "--wait")
	wantCode(t, res, 0)
	wantContains(t, "stderr", res.stderr, "already published: not sent again")
	wantContains(t, "stdout", res.stdout, "pod/default/pinned: Synced", "intent 3")
	if got := len(c.intents()); got != 3 {
		t.Errorf("%d intents stored, want 3", got)
	}
}

func TestApplyWaitTimesOut(t *testing.T) {
	c := newCluster(t)
	c.heartbeat("n1") // a heartbeat, but nobody answers
	res := c.run("apply", "-f", examples+"job.yaml", "--wait", "--timeout", "500ms")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "no result for pod/default/job (intent 1) from node n1 in time", "jetlet run --node n1")
}

func TestApplyExamplesAreValid(t *testing.T) {
	files, _ := filepath.Glob(examples + "*.yaml")
	if len(files) < 4 {
		t.Fatalf("examples: %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := parseManifest(data, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			d.metadata()["uid"] = "u1"
			body, _ := d.body()
			if reasons := jc.ValidateIntent(body, "n1", "u1"); reasons != nil {
				t.Errorf("%s: %v", f, reasons)
			}
		}
	}
}

func podYAML(name, container string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
spec:
  containers:
  - name: ` + container + `
    image: busybox:1.36
    command: ["sh", "-c", "sleep 1000"]
`
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
