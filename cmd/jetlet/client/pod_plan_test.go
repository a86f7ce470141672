package client

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/poll"
)

// The plan and the next sync agree (docs/contract.md section 14): over kubelet's
// scenarios on a real `jetlet run`, the node's plan for an intent
// (--dry-run=node, which publishes nothing), then that intent applied, and
// its result's runtime actions compared with what the plan said.
func TestThePlanIsWhatTheSyncDoes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jetlet run")
	}
	ex := examplesDir(t)
	dir := t.TempDir()
	variant := func(name, from string, replace ...string) string {
		data, err := os.ReadFile(filepath.Join(ex, from))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.NewReplacer(replace...).Replace(string(data))
		if text == string(data) {
			t.Fatalf("%s: the replacement changes nothing", name)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	_, c := startJetletRun(t, "web", "init", "crashloop")

	for _, step := range []struct{ what, file string }{
		{"a new pod", filepath.Join(ex, "web.yaml")},
		{"one container's command changed", variant("web-command.yaml", "web.yaml", "sleep 5", "sleep 3")},
		{"its image changed", variant("web-image.yaml", "web.yaml", "sleep 5", "sleep 3", "busybox:1.36", "busybox:latest")},
		{"a pod with an init container", filepath.Join(ex, "init.yaml")},
	} {
		t.Run(step.what, func(t *testing.T) {
			c.t = t
			c.wantPlanDone(step.file)
		})
	}
	c.t = t
	// Its app container runs once its init container is done.
	poll.Until(t, time.Minute, poll.Msg("init Running"), func() bool { return c.phaseOn("n1", "init") == schemas.PhaseRunning })
	t.Run("its init container changed", func(t *testing.T) {
		c.t = t
		c.wantPlanDone(variant("init-changed.yaml", "init.yaml", "echo preparing", "echo preparing again"))
	})

	c.t = t
	crashloop := filepath.Join(ex, "crashloop.yaml")
	wantCode(t, c.run("apply", "-f", crashloop, "--wait"), 0)
	c.waitBackOff(crashloop, 3*time.Second)
	t.Run("a crash-looping container in back-off", func(t *testing.T) {
		c.t = t
		c.wantPlanDone(crashloop, "--force")
	})
}

// plan is the node's plan for the pod of file.
func (c *cluster) plan(file string) schemas.PodPlan {
	c.t.Helper()
	res := c.run("apply", "-f", file, "--dry-run=node", "-o", "json")
	var plan schemas.PodPlan
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &plan) != nil {
		c.t.Fatalf("apply --dry-run=node -o json: exit %d, %q", res.code, res.stdout)
	}
	return plan
}

// wantPlanDone asks for the plan of file, applies it (with args) and
// compares the result's runtime actions with the plan's.
func (c *cluster) wantPlanDone(file string, args ...string) {
	c.t.Helper()
	plan := c.plan(file)
	res := c.run(append([]string{"apply", "-f", file, "--wait", "-o", "json"}, args...)...)
	var result schemas.SyncResult
	if err := json.Unmarshal([]byte(res.stdout), &result); err != nil {
		c.t.Fatalf("apply --wait -o json: exit %d, %q: %v", res.code, res.stdout, err)
	}
	planned, done := plannedActions(plan), doneActions(result)
	if !slices.Equal(planned, done) {
		c.t.Errorf("the plan said %q, the sync did %q", planned, done)
	}
}

// plannedActions are the runtime actions a plan stands for, sorted, as a
// sync's result names them: ACTION TARGET[: ERROR] (a sandbox's without its
// target).
func plannedActions(plan schemas.PodPlan) []string {
	var out []string
	switch plan.Sandbox.Action {
	case schemas.PlanCreate:
		out = append(out, schemas.ActionCreatePodSandbox)
	case schemas.PlanRecreate:
		out = append(out, schemas.ActionKillPodSandbox, schemas.ActionCreatePodSandbox)
	case schemas.PlanKill:
		out = append(out, schemas.ActionKillPodSandbox)
	}
	for _, s := range plan.Containers {
		start := schemas.ActionStartContainer
		if s.Init {
			start = schemas.ActionInitContainer
		}
		if s.BackOffUntil != nil {
			out = append(out, fmt.Sprintf("%s %s: %s", start, s.Name, s.Reason))
			continue
		}
		switch s.Action {
		case schemas.PlanStart:
			out = append(out, start+" "+s.Name)
		case schemas.PlanKill:
			out = append(out, schemas.ActionKillContainer+" "+s.Name)
		case schemas.PlanRestart:
			out = append(out, schemas.ActionKillContainer+" "+s.Name, start+" "+s.Name)
		}
	}
	slices.Sort(out)
	return out
}

// doneActions are a result's runtime actions but image pulls (a plan says
// nothing of images), sorted.
func doneActions(r schemas.SyncResult) []string {
	var out []string
	for _, a := range r.Actions {
		if a.Action == schemas.ActionPullImage {
			continue
		}
		s := a.Action + " " + a.Target
		if a.Action == schemas.ActionCreatePodSandbox || a.Action == schemas.ActionKillPodSandbox {
			s = a.Action // its target is the pod's uid, a new pod's made anew at each apply
		}
		if a.Error != "" {
			s += ": " + a.Error
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// waitBackOff waits for the pod of file to be in its crash-loop back-off
// for left more: once it crashed twice, and the crash is old news (the
// plans have said so for over a relist period, and its log is written).
func (c *cluster) waitBackOff(file string, left time.Duration) {
	c.t.Helper()
	var until, since time.Time
	poll.Until(c.t, 2*time.Minute, poll.Msg(fmt.Sprintf("%s in back-off for %s more", filepath.Base(file), left)), func() bool {
		plan := c.plan(file)
		i := slices.IndexFunc(plan.Containers, func(s schemas.PlanStep) bool { return s.BackOffUntil != nil })
		switch {
		case i < 0:
			until = time.Time{}
			return false
		case !plan.Containers[i].BackOffUntil.Equal(until):
			until, since = *plan.Containers[i].BackOffUntil, time.Now()
			return false
		}
		return time.Since(since) > 1500*time.Millisecond && time.Until(until) > left
	})
}

// A real `jetlet run` declares its features in its record (get nodes -o
// wide shows them) and its plan names those a pod needs and the node
// lacks: resizing a running pod's init container (not a sidecar) needs
// InPlacePodVerticalScalingInitContainers, which jetlet does not do.
func TestThePlanNamesTheDeclaredFeaturesAPodLacks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jetlet run")
	}
	_, c := startJetletRun(t, "init-limits")
	var rec schemas.NodeRecord
	poll.Until(t, time.Minute, poll.Msg("the node's record"), func() bool {
		res := c.run("get", "nodes", "--node", "n1", "-o", "json")
		var l list[schemas.NodeRecord]
		if res.code != 0 || json.Unmarshal([]byte(res.stdout), &l) != nil || len(l.Items) != 1 {
			return false
		}
		rec = l.Items[0]
		return true
	})
	want := "<none>"
	if len(rec.DeclaredFeatures) > 0 {
		want = strings.Join(rec.DeclaredFeatures, ",")
	}
	res := c.run("get", "nodes", "-o", "wide")
	wantCode(t, res, 0)
	if lines := strings.Split(strings.TrimSpace(res.stdout), "\n"); len(lines) != 2 || !strings.HasSuffix(lines[0], "DECLARED-FEATURES") || !strings.HasSuffix(lines[1], " "+want) {
		t.Errorf("get nodes -o wide, want DECLARED-FEATURES %s:\n%s", want, res.stdout)
	}

	dir := t.TempDir()
	pod := func(name, cpu string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Pod
metadata: {name: init-limits, namespace: default}
spec:
  terminationGracePeriodSeconds: 5
  initContainers:
    - name: setup
      image: busybox:1.36
      imagePullPolicy: IfNotPresent
      command: ["true"]
      resources: {limits: {cpu: `+cpu+`}}
  containers:
    - name: app
      image: busybox:1.36
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 5 & wait $!; done"]
`), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	first, resized := pod("first.yaml", "100m"), pod("resized.yaml", "200m")
	if plan := c.plan(first); len(plan.MissingFeatures) != 0 {
		t.Errorf("a new pod: missing features %v, want none", plan.MissingFeatures)
	}
	wantCode(t, c.run("apply", "-f", first, "--wait"), 0)
	if plan := c.plan(resized); !slices.Equal(plan.MissingFeatures, []string{"InPlacePodVerticalScalingInitContainers"}) {
		t.Errorf("its init container resized: missing features %v, want InPlacePodVerticalScalingInitContainers", plan.MissingFeatures)
	}
	res = c.run("apply", "-f", resized, "--dry-run=node")
	if !strings.Contains(res.stdout, "  ! needs declared features the node lacks: InPlacePodVerticalScalingInitContainers\n") {
		t.Errorf("apply --dry-run=node:\n%s", res.stdout)
	}
}
