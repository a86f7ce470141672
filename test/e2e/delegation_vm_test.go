//go:build jetlet_vm

package e2e_test

import (
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"

	"github.com/jetlet/jetlet/test/jetlettest"
)

// On a cgroup v2 host with systemd (CI's guest), `jetlet run` in a unit
// without Delegate=yes refuses to start its embedded runtime, naming its
// cgroup and the fix, rather than make pod cgroups that systemd takes back.
// RuntimeMaxSec ends a jetlet that did not refuse.
func TestJetletRefusesACgroupNotDelegatedToIt(t *testing.T) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	unit := "jetlet-undelegated-" + hex.EncodeToString(b[:])
	dir := shortDir(t)
	args := []string{"run", "--node", "n1", "--data-dir", dir, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}
	cmd := []string{"--quiet", "--wait", "--pipe", "--collect", "--unit=" + unit, "-p", "Delegate=no", "-p", "RuntimeMaxSec=120"}
	for _, e := range jetlettest.PodNetworkEnv(t, args) {
		cmd = append(cmd, "--setenv="+e)
	}
	cmd = append(cmd, "--", jetlettest.Binary(t))
	out, err := exec.Command("systemd-run", append(cmd, args...)...).CombinedOutput()
	if err == nil {
		t.Fatalf("jetlet run in %s.service (Delegate=no) exited 0:\n%s", unit, out)
	}
	for _, want := range []string{
		"the runtime's cgroup is not delegated to it: cgroup /system.slice/" + unit + ".service is systemd's",
		"Delegate=yes",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("jetlet run in %s.service (Delegate=no): %v, its output lacks %q:\n%s", unit, err, want, out)
		}
	}
}
