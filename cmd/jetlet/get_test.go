package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/jetlet/jetlet/schemas"
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
	for _, want := range []string{`NAME\s+STATUS\s+PODS\s+RUNTIME\s+VERSION\s+AGE\s+HEARTBEAT`, `n1\s+Ready\s+0\s+fake 0.1\s+test\s+60m\s+\d+s ago`, `n2\s+Ready`} {
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
	wantContains(t, "stderr", res.stderr, "No pods found on node n9.")
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
