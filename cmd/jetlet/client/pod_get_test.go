package client

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

func TestGetPodsAndNodes(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", func(p *corev1.Pod) bool { return p.Name == "crashloop" })
	c.startNode("n2", nil)
	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--node", "n1", "--wait"), 0)
	wantCode(t, c.run("apply", "-f", examples+"crashloop.yaml", "--node", "n1", "--wait"), 2)
	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--node", "n2", "--wait"), 0)

	res := c.run("get", "pods")
	wantCode(t, res, 0)
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want a header and 3 pods", len(lines))
	}
	for i, want := range []string{
		`^NAMESPACE\s+NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE\s+NODE$`,
		`^default\s+crashloop\s+0/1\s+CrashLoopBackOff\s+3\s+\d+s\s+n1$`,
		`^default\s+web\s+1/1\s+Running\s+0\s+\d+s\s+n1$`,
		`^default\s+web\s+1/1\s+Running\s+0\s+\d+s\s+n2$`,
	} {
		if !regexp.MustCompile(want).MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], want)
		}
	}

	res = c.run("get", "pods", "--node", "n2", "-o", "wide")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, "UID", "IP", "REVISION", "10.88.0.7")
	if strings.Contains(res.stdout, " n1") {
		t.Errorf("--node n2 lists n1's pods:\n%s", res.stdout)
	}

	res = c.run("get", "pods", "-o", "json")
	wantCode(t, res, 0)
	var l list[schemas.PodStatus]
	if err := json.Unmarshal([]byte(res.stdout), &l); err != nil {
		t.Fatal(err)
	}
	if l.Kind != "PodStatusList" || len(l.Items) != 3 || l.Items[0].Name != "crashloop" {
		t.Errorf("-o json: %+v", l)
	}
	res = c.run("get", "pods", "-o", "yaml")
	wantCode(t, res, 0)
	var ly list[schemas.PodStatus] // not l: an empty output would leave its items in place
	if err := yaml.Unmarshal([]byte(res.stdout), &ly); err != nil || ly.Kind != "PodStatusList" || len(ly.Items) != 3 {
		t.Errorf("-o yaml: %v, %+v", err, ly)
	}

	res = c.run("get", "nodes")
	wantCode(t, res, 0)
	for _, want := range []string{
		`NAME\s+STATUS\s+CPU\s+MEMORY\s+PODS\s+PRESSURE\s+RUNTIME\s+AGE\s+VERSION\s+HEARTBEAT`,
		`n1\s+Ready\s+<none>\s+<none>\s+0\s+<none>\s+fake 0.1\s+60m\s+test\s+\d+s ago`, `n2\s+Ready`,
	} {
		if !regexp.MustCompile(want).MatchString(res.stdout) {
			t.Errorf("get nodes does not match %s:\n%s", want, res.stdout)
		}
	}
	res = c.run("get", "nodes", "-o", "json")
	wantCode(t, res, 0)
	var nl list[schemas.NodeRecord]
	if err := json.Unmarshal([]byte(res.stdout), &nl); err != nil || nl.Kind != "NodeList" || len(nl.Items) != 2 {
		t.Errorf("get nodes -o json: %v %+v", err, nl)
	}
}

func TestGetPodsEmpty(t *testing.T) {
	c := newCluster(t)
	res := c.run("get", "pods", "--node", "n9")
	wantCode(t, res, 0)
	wantContains(t, "stderr", res.stderr, "No pods found in namespace default on node n9.")
	res = c.run("get", "pods", "-o", "json")
	wantCode(t, res, 0)
	wantContains(t, "stdout", res.stdout, `"items": []`)
}

func TestPodStatusText(t *testing.T) {
	running := schemas.ContainerStatus{Name: "app", State: schemas.ContainerRunning, Ready: true}
	tests := []struct {
		name   string
		mutate func(*schemas.PodStatus)
		want   string
	}{
		{"running", func(p *schemas.PodStatus) {}, "Running"},
		{"creating", func(p *schemas.PodStatus) {
			p.Phase = schemas.PhasePending
			p.Containers[0] = schemas.ContainerStatus{State: schemas.ContainerWaiting, Reason: "ContainerCreating"}
		}, "ContainerCreating"},
		{"crashloop", func(p *schemas.PodStatus) {
			p.Containers[0] = schemas.ContainerStatus{State: schemas.ContainerWaiting, Reason: "CrashLoopBackOff"}
		}, "CrashLoopBackOff"},
		{"completed", func(p *schemas.PodStatus) {
			p.Phase = schemas.PhaseSucceeded
			p.Containers[0] = schemas.ContainerStatus{State: schemas.ContainerExited, Reason: "Completed"}
		}, "Completed"},
		{"completed beside a running one", func(p *schemas.PodStatus) {
			p.Containers = append(p.Containers, schemas.ContainerStatus{State: schemas.ContainerExited, Reason: "Completed"})
		}, "Running"},
		{"exit code", func(p *schemas.PodStatus) {
			p.Phase = schemas.PhaseFailed
			p.Containers[0] = schemas.ContainerStatus{State: schemas.ContainerExited, ExitCode: 3}
		}, "ExitCode:3"},
		{"init running", func(p *schemas.PodStatus) {
			p.Phase = schemas.PhasePending
			p.InitContainers = []schemas.ContainerStatus{{State: schemas.ContainerExited}, {State: schemas.ContainerRunning}}
		}, "Init:1/2"},
		{"init waiting", func(p *schemas.PodStatus) {
			p.InitContainers = []schemas.ContainerStatus{{State: schemas.ContainerWaiting, Reason: "PodInitializing"}}
		}, "Init:0/1"},
		{"init crashloop", func(p *schemas.PodStatus) {
			p.InitContainers = []schemas.ContainerStatus{{State: schemas.ContainerWaiting, Reason: "CrashLoopBackOff"}}
		}, "Init:CrashLoopBackOff"},
		{"init failed", func(p *schemas.PodStatus) {
			p.InitContainers = []schemas.ContainerStatus{{State: schemas.ContainerExited, ExitCode: 1, Reason: "Error"}}
		}, "Init:Error"},
		{"terminating", func(p *schemas.PodStatus) { p.Phase = schemas.PhaseTerminating }, "Terminating"},
		{"refused at admission", func(p *schemas.PodStatus) {
			p.Phase, p.Reason, p.Containers = schemas.PhaseFailed, "OutOfmemory", nil
		}, "OutOfmemory"},
		{"evicted, its container killed", func(p *schemas.PodStatus) {
			p.Phase, p.Reason = schemas.PhaseFailed, "Evicted"
			p.Containers[0] = schemas.ContainerStatus{State: schemas.ContainerExited, ExitCode: 137, Reason: "Error"}
		}, "Evicted"},
		{"reason of a pod not failed", func(p *schemas.PodStatus) { p.Reason = "Something" }, "Running"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &schemas.PodStatus{Phase: schemas.PhaseRunning, Containers: []schemas.ContainerStatus{running}}
			tc.mutate(p)
			if got := podStatusText(p); got != tc.want {
				t.Errorf("podStatusText = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPodStartAndAges(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	p := &schemas.PodStatus{ObservedAt: t0.Add(time.Hour), Containers: []schemas.ContainerStatus{
		{StartedAt: t0.Add(time.Minute).Format(time.RFC3339Nano)}, {StartedAt: t0.Format(time.RFC3339Nano)}, {StartedAt: ""},
	}}
	if got := podStart(p); !got.Equal(t0) {
		t.Errorf("podStart = %s, want %s", got, t0)
	}
	p.Containers = nil
	if got := podStart(p); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("podStart without containers = %s, want observedAt", got)
	}
	for d, want := range map[time.Duration]string{
		5 * time.Second: "5s", 90 * time.Second: "90s", 5*time.Minute + 30*time.Second: "5m30s",
		45 * time.Minute: "45m", 5*time.Hour + 30*time.Minute: "5h30m", 30 * time.Hour: "30h",
		3*24*time.Hour + 5*time.Hour: "3d5h", 30 * 24 * time.Hour: "30d", 3 * 365 * 24 * time.Hour: "3y", -time.Second: "0s",
	} {
		if got := humanAge(d); got != want {
			t.Errorf("humanAge(%s) = %q, want %q", d, got, want)
		}
	}
}

// -n, -A, NAME and -a select as kubectl's do; a deleted pod is hidden
// unless -a; AGE counts from the pod's first intent.
func TestGetPodsSelects(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", nil)
	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--wait"), 0)
	other := strings.Replace(podYAML("api", "app"), "name: api\n", "name: api\n  namespace: prod\n", 1)
	wantCode(t, c.runIn(other, "apply", "-f", "-", "--wait"), 0)
	wantCode(t, c.runIn(podYAML("gone", "app"), "apply", "-f", "-", "--wait"), 0)
	wantCode(t, c.run("delete", "default/gone", "--wait"), 0)

	for _, tc := range []struct {
		args       []string
		want, lack []string
	}{
		{[]string{"get", "pods"}, []string{"web"}, []string{"api", "gone"}},
		{[]string{"get", "pods", "-n", "prod"}, []string{"api"}, []string{"web", "gone"}},
		{[]string{"get", "pods", "-A"}, []string{"web", "api"}, []string{"gone"}},
		{[]string{"get", "pods", "-A", "-a"}, []string{"web", "api", "gone", "Terminated"}, nil},
		{[]string{"get", "pod", "web"}, []string{"web"}, []string{"api"}},
		{[]string{"get", "pod", "api", "-n", "prod"}, []string{"api"}, []string{"web"}},
	} {
		res := c.run(tc.args...)
		wantCode(t, res, 0)
		for _, w := range tc.want {
			if !regexp.MustCompile(`(?m)\s` + w + `\s`).MatchString(res.stdout) {
				t.Errorf("jetlet %s does not list %s:\n%s", strings.Join(tc.args, " "), w, res.stdout)
			}
		}
		for _, l := range tc.lack {
			if regexp.MustCompile(`(?m)\s` + l + `\s`).MatchString(res.stdout) {
				t.Errorf("jetlet %s lists %s:\n%s", strings.Join(tc.args, " "), l, res.stdout)
			}
		}
	}
	res := c.run("get", "pod", "gone")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, `pod "gone" not found in namespace default (it was deleted: -a shows its last status)`)
	res = c.run("get", "pods", "-n", "prod", "-A")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "give -n NAMESPACE or -A, not both")
}

// get pods -w prints the list, then a line for each change: here the pod
// applied while it watches, going Running.
func TestGetPodsWatch(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", nil)
	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--wait"), 0)
	f := c.follow("get", "pods", "-w")
	stdout := &f.stdout
	poll.Until(t, 10*time.Second, poll.Msg("the list"), func() bool { return strings.Contains(stdout.String(), "web") })
	wantCode(t, c.runIn(podYAML("late", "app"), "apply", "-f", "-", "--wait"), 0)
	poll.Until(t, 10*time.Second, poll.Msg("a line for late going Running"), func() bool {
		return regexp.MustCompile(`(?m)^default\s+late\s+1/1\s+Running\s`).MatchString(stdout.String())
	})
	f.stop(t)
	t.Logf("get pods -w:\n%s", stdout.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if !strings.HasPrefix(lines[0], "NAMESPACE") || !strings.Contains(lines[1], "web") {
		t.Errorf("-w output does not begin with the header and the list:\n%s", stdout.String())
	}
	header := lines[0]
	for _, l := range lines[1:] {
		if at := strings.Index(header, "STATUS"); len(l) <= at || l[at-1] != ' ' || l[at] == ' ' {
			t.Errorf("line %q is not aligned under STATUS:\n%s", l, stdout.String())
		}
	}
}

// AGE counts from the pod's first intent, not from its containers' starts
// (which a restart moves): here a status whose container claims to have
// started three hours ago, for a pod first applied seconds ago.
func TestGetPodsAgeIsFromTheFirstIntent(t *testing.T) {
	c := newCluster(t)
	c.startNode("n1", nil)
	wantCode(t, c.run("apply", "-f", examples+"web.yaml", "--wait"), 0)
	kv, err := c.js.KeyValue(t.Context(), schemas.BucketStatus)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for key := range keys.Keys() {
		e, err := kv.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		var st schemas.PodStatus
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			t.Fatal(err)
		}
		st.Containers[0].StartedAt = time.Now().Add(-3 * time.Hour).UTC().Format(time.RFC3339Nano)
		if _, err := kv.Put(t.Context(), key, mustJSON(t, st)); err != nil {
			t.Fatal(err)
		}
	}
	res := c.run("get", "pods")
	wantCode(t, res, 0)
	if !regexp.MustCompile(`(?m)^default\s+web\s+1/1\s+Running\s+0\s+\d+s\s+n1$`).MatchString(res.stdout) {
		t.Errorf("AGE is not the seconds since the first intent:\n%s", res.stdout)
	}
}
