package client

import (
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/jetlettest"
)

// Cordon through a real `jetlet run`: new pods are refused with
// NodeUnschedulable while the running one goes on, get nodes says
// SchedulingDisabled, the cordon outlives a restart, and uncordon admits
// new pods again.
func TestCordonRefusesNewPodsAndOutlivesARestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts jetlet run")
	}
	ex := examplesDir(t)
	p, c := startJetletRun(t, "web", "job", "init")
	wantCode(t, c.run("apply", "-f", ex+"web.yaml", "--wait"), 0)

	res := c.run("node", "cordon", "n1")
	wantCode(t, res, 0)
	wantContains(t, "node cordon", res.stdout, "node/n1 cordoned")
	wantContains(t, "node cordon again", c.run("node", "cordon", "n1").stdout, "node/n1 already cordoned")
	c.waitCordoned("n1", true)

	res = c.run("apply", "-f", ex+"job.yaml", "--wait")
	if res.code == 0 {
		t.Errorf("apply of a new pod on a cordoned node: exit 0, want its Rejected result")
	}
	wantContains(t, "apply on a cordoned node", res.stdout, "Rejected", "NodeUnschedulable")
	wantContains(t, "get pods", c.run("get", "pods").stdout, "web")
	if out := c.run("get", "pods").stdout; !regexp.MustCompile(`web\s+1/1\s+Running`).MatchString(out) {
		t.Errorf("web is not Running on the cordoned node:\n%s", out)
	}

	// The cordon is kept in the data dir: the node comes back cordoned.
	p.Signal(syscall.SIGTERM)
	if code := p.Wait(time.Minute); code != 0 {
		t.Fatalf("jetlet run exited %d on SIGTERM", code)
	}
	if _, err := os.Stat(filepath.Join("jetlet-data", "cordoned")); err != nil {
		t.Errorf("the cordon is not kept in the data dir: %v", err)
	}
	p = jetlettest.Start(t, "run", "--node", "n1", "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0")
	p.WaitReady(60 * time.Second)
	c.url = p.NATSURL()
	c.waitCordoned("n1", true)

	res = c.run("node", "uncordon", "n1")
	wantCode(t, res, 0)
	wantContains(t, "node uncordon", res.stdout, "node/n1 uncordoned")
	c.waitCordoned("n1", false)
	res = c.run("apply", "-f", ex+"init.yaml", "--wait")
	wantCode(t, res, 0)
	wantContains(t, "apply after uncordon", res.stdout, "Synced")
}
