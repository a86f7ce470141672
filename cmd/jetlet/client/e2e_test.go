package client

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/poll"
)

// TestClientAgainstJetletRun is the README's quick start with a real
// `jetlet run` (embedded NATS, embedded process runtime): apply the examples,
// see them in `get pods` and `events`, delete them, see PodTerminated. As in
// the README, jetlet and the commands run in one directory on the default
// data dir, whose seed authenticates the commands.
func TestClientAgainstJetletRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jetlet run")
	}
	examples := examplesDir(t)
	pods := []string{"web", "job", "init", "crashloop"}
	_, c := startJetletRun(t, pods...)

	res := c.run("get", "nodes")
	wantCode(t, res, 0)
	wantContains(t, "get nodes", res.stdout, "n1", "Ready", "jetlet-proc")

	for _, name := range pods {
		res := c.run("apply", "-f", examples+name+".yaml", "--wait")
		wantCode(t, res, 0)
		wantContains(t, "apply --wait", res.stdout, "pod/default/"+name+": Synced (node n1, uid ", "CreatePodSandbox")
		wantContains(t, "apply --wait", res.stderr, "SandboxCreated")
	}
	want := map[string]string{"web": "Running", "job": "Completed", "init": "Running", "crashloop": "CrashLoopBackOff"}
	var table string
	poll.Until(t, 90*time.Second, func() string { return "get pods to show every example as expected; last:\n" + table }, func() bool {
		res := runCLI(t.Context(), "", "get", "pods", "--nats-url", c.url)
		table = res.stdout
		for name, status := range want {
			if !regexp.MustCompile(`(?m)^default\s+` + name + `\s+\d+/\d+\s+` + status + `\s`).MatchString(res.stdout) {
				return false
			}
		}
		return true
	})
	t.Logf("get pods:\n%s", table)

	res = c.run("events", "--pod", "default/web")
	wantCode(t, res, 0)
	wantContains(t, "events", res.stdout, "SandboxCreated", "ContainerStarted")
	res = c.run("events", "--pod", "default/init", "--type", "ContainerDied", "-o", "json")
	wantCode(t, res, 0)
	wantContains(t, "init's events", res.stdout, `"container":"setup"`, `"reason":"Completed"`)

	// describe shows the crash loop: the last exit and the back-off.
	var described string
	poll.Until(t, 60*time.Second, func() string { return "describe to show crashloop's BackOff; last:\n" + described }, func() bool {
		res := runCLI(t.Context(), "", "describe", "pod", "default/crashloop", "--nats-url", c.url)
		described = res.stdout
		return res.code == 0 && regexp.MustCompile(`(?m)^  \S+\s+BackOff\s+app\s`).MatchString(described)
	})
	t.Logf("describe pod default/crashloop:\n%s", described)
	for _, want := range []string{`(?m)^    Last State:\s+Terminated$`, `(?m)^      Exit Code:\s+1$`, `(?m)^      Reason:\s+CrashLoopBackOff$`} {
		if !regexp.MustCompile(want).MatchString(described) {
			t.Errorf("describe pod default/crashloop does not match %s", want)
		}
	}

	res = c.run("delete", "default/web", "--wait")
	wantCode(t, res, 0)
	wantContains(t, "delete --wait", res.stdout, "pod/default/web: Synced", "phase: Terminated")
	res = c.run("events", "--pod", "default/web", "--type", "PodTerminated")
	wantCode(t, res, 0)
	wantContains(t, "events", res.stdout, "PodTerminated")

	res = c.run("history", "default/web")
	wantCode(t, res, 0)
	if n := len(regexp.MustCompile(`(?m)^\d+\s+\d+\s+(apply|delete)\s+\S+\s+Synced\s`).FindAllString(res.stdout, -1)); n != 2 {
		t.Errorf("history shows %d synced intents, want 2 (apply, delete)", n)
	}

	// A manifest the node would reject is refused before publishing.
	res = c.runIn(strings.Replace(podYAML("bad", "app"), "busybox:1.36", "", 1), "apply", "-f", "-", "--wait")
	wantCode(t, res, 1)
	wantContains(t, "stderr", res.stderr, "pod.spec.containers[0].image: invalid: ")
}
