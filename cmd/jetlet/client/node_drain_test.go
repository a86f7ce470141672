package client

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/natstest"
	"github.com/jetlet/jetlet/test/poll"
)

// Drain and replay between two real `jetlet run` nodes on one NATS: a drain
// interrupted at a random moment and run again moves each pod exactly once
// and leaves the ended one; a replay re-creates the pods of a node that
// stopped, and nothing twice when run again; a replay at a moment before
// the node had pods re-creates none.
func TestNodeDrainAndReplayMoveEachPodOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two jetlet runs")
	}
	t.Parallel()
	ex := examplesDir(t)
	c, nodes := startTwoNodes(t)
	for _, name := range []string{"web", "init", "job"} {
		wantCode(t, c.run("apply", "-f", ex+name+".yaml", "--node", "n1", "--wait"), 0)
	}
	poll.Until(t, time.Minute, poll.Msg("job Succeeded on n1"), func() bool {
		return c.phaseOn("n1", "job") == schemas.PhaseSucceeded
	})
	beforeDrain := time.Now()

	// Interrupted anywhere from before its first publish to its end (a
	// drain of these pods takes about a second).
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rand.Int64N(int64(1500*time.Millisecond))))
	res := runCLI(ctx, "", "node", "drain", "n1", "--to", "n2", "--grace", "1", "--nats-url", c.url)
	cancel()
	t.Logf("drain interrupted: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	res = c.run("node", "drain", "n1", "--to", "n2", "--grace", "1")
	wantCode(t, res, 0)
	wantContains(t, "drain", res.stdout, "pod/default/job: left on n1 (Succeeded)", "node/n1 drained to n2")
	for _, name := range []string{"web", "init"} {
		c.wantLiveCopies(name, map[string]int{"n1": 0, "n2": 1})
	}
	c.wantLiveCopies("job", map[string]int{"n1": 1, "n2": 0})
	c.waitCordoned("n1", true)

	// n2 stops; its pods are replayed onto n1, uncordoned.
	nodes["n2"].Signal(syscall.SIGTERM)
	if code := nodes["n2"].Wait(time.Minute); code != 0 {
		t.Fatalf("jetlet run n2 exited %d on SIGTERM", code)
	}
	wantCode(t, c.run("node", "uncordon", "n1"), 0)
	c.waitCordoned("n1", false) // replay looks at the node's record
	res = c.run("node", "replay", "n2", "--to", "n1", "--at", beforeDrain.Format(time.RFC3339Nano))
	wantCode(t, res, 0)
	wantContains(t, "replay before the drain", res.stdout, "0 of 0 pods moved")
	res = c.run("node", "replay", "n2", "--to", "n1")
	wantCode(t, res, 0)
	wantContains(t, "replay", res.stdout, "2 of 2 pods moved")
	res = c.run("node", "replay", "n2", "--to", "n1")
	wantCode(t, res, 0)
	wantContains(t, "replay again", res.stdout, "(there already)", "2 of 2 pods moved")
	for _, name := range []string{"web", "init"} {
		c.wantLiveCopies(name, map[string]int{"n1": 1})
	}
}

// phaseOn is the phase of the live pod name on node, "" when there is none.
func (c *cluster) phaseOn(node, name string) schemas.PodPhase {
	for _, p := range c.statusesOf(node) {
		if p.Name == name && p.Phase != schemas.PhaseTerminated {
			return p.Phase
		}
	}
	return ""
}

// wantLiveCopies checks how many pods called name each node runs (not
// deleted).
func (c *cluster) wantLiveCopies(name string, want map[string]int) {
	c.t.Helper()
	for node, n := range want {
		got := 0
		for _, p := range c.statusesOf(node) {
			if p.Name == name && p.Phase != schemas.PhaseTerminated && p.Phase != schemas.PhaseTerminating {
				got++
			}
		}
		if got != n {
			c.t.Errorf("%d live pods called %s on %s, want %d", got, name, node, n)
		}
	}
}

func (c *cluster) statusesOf(node string) []schemas.PodStatus {
	c.t.Helper()
	res := runCLI(c.t.Context(), "", "get", "pods", "--node", node, "-o", "json", "--nats-url", c.url)
	var l list[schemas.PodStatus]
	if err := json.Unmarshal([]byte(res.stdout), &l); err != nil {
		c.t.Fatalf("get pods --node %s -o json: %v\n%s", node, err, res.stderr)
	}
	return l.Items
}

// waitCordoned waits for node's record to say it is cordoned, or not.
func (c *cluster) waitCordoned(node string, cordoned bool) {
	c.t.Helper()
	poll.Until(c.t, 30*time.Second, poll.Msg(fmt.Sprintf("get nodes to show %s SchedulingDisabled: %t", node, cordoned)), func() bool {
		out := runCLI(c.t.Context(), "", "get", "nodes", "--nats-url", c.url).stdout
		return regexp.MustCompile(node+`\s+Ready,SchedulingDisabled\s`).MatchString(out) == cordoned
	})
}

// startTwoNodes starts n1 and n2, two `jetlet run`s on one NATS server.
func startTwoNodes(tb testing.TB) (*cluster, map[string]*jetlettest.Process) {
	tb.Helper()
	c := &cluster{t: tb, url: natstest.RunServer(tb).ClientURL()}
	nodes := map[string]*jetlettest.Process{}
	for _, n := range []string{"n1", "n2"} {
		nodes[n] = jetlettest.StartNode(tb, c.url, n)
	}
	return c, nodes
}

// BenchmarkDrain50Pods drains 50 running pods from n1 to n2 and reports
// how long it took and how many pods did not arrive (want 0).
//
//	go test -run '^$' -bench Drain50Pods -benchtime 1x ./cmd/jetlet/client
func BenchmarkDrain50Pods(b *testing.B) {
	const pods = 50
	c, _ := startTwoNodes(b)
	var manifest strings.Builder
	for i := range pods {
		fmt.Fprintf(&manifest, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p%02d}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers: [{name: app, image: busybox:1.36, command: [sleep, \"86400\"]}]\n", i)
	}
	file := filepath.Join(b.TempDir(), "pods.yaml")
	if err := os.WriteFile(file, []byte(manifest.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	wantCode(b, c.run("apply", "-f", file, "--node", "n1", "--wait"), 0)
	b.Cleanup(func() {
		for i := range pods {
			for _, n := range []string{"n1", "n2"} {
				c.run("delete", fmt.Sprintf("default/p%02d", i), "--node", n, "--grace", "0", "--wait", "--ignore-not-found")
			}
		}
	})
	running := func(node string) (n int) {
		for _, p := range c.statusesOf(node) {
			if p.Phase == schemas.PhaseRunning {
				n++
			}
		}
		return n
	}
	poll.Until(b, time.Minute, poll.Msg("50 pods Running on n1"), func() bool { return running("n1") == pods })
	b.ResetTimer()
	start := time.Now()
	wantCode(b, c.run("node", "drain", "n1", "--to", "n2", "--grace", "1"), 0)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(elapsed.Seconds(), "drain-s")
	b.ReportMetric(float64(pods-running("n2")), "pods-lost")
	c.wantLiveCopies("p00", map[string]int{"n1": 0, "n2": 1})
}
