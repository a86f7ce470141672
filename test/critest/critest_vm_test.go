//go:build jetlet_vm

// Package critest_test runs the critest stage's suite in CI's guest (test/vm:
// cgroup v2, systemd as PID 1) against jetlet run as the guest's
// jetlet.service.
package critest_test

import (
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/syncbuf"
	"github.com/jetlet/jetlet/test/testimages"
	"github.com/jetlet/jetlet/test/vm/vmguest"
)

//go:embed skips.txt
var skips []byte

// The guest's jetlet.service keeps its data dir, and so its CRI socket, in
// /var/lib/jetlet (StateDirectory=jetlet).
var socket = filepath.Join(vmguest.JetletDataDir, "cri.sock")

// critest (built by build.sh, JETLET_VM_COMMANDS) against the embedded
// runtime of `jetlet run` as the guest's systemd unit, installed as
// docs/deploy.md installs it (each pod in a systemd scope of its own under
// jetlet.slice). As in the critest stage (run.sh, sandbox.sh) every image
// critest pulls is served by testimages in the guest, skips.txt says which
// specs are skipped and skipcheck judges the run.
func TestCritestAgainstJetletService(t *testing.T) {
	dir := t.TempDir()
	skipFile := filepath.Join(dir, "skips.txt")
	write(t, skipFile, string(skips))

	// The registry: plain HTTP on 127.0.0.1:5000, where the test-images
	// file points critest's default images, and TLS on 443 for the names
	// critest's source uses, which the guest's /etc/hosts resolves to
	// itself, with the CA in the guest's bundle (the guest's disk is thrown
	// away after the run).
	ca := filepath.Join(dir, "ca.pem")
	var regLog syncbuf.Buffer
	reg := exec.Command(vmguest.Command(t, "testimages"), "-set", "critest", "-serve", "127.0.0.1:5000",
		"-serve-tls", "127.0.0.1:443", "-tls-names", strings.Join(testimages.CritestRegistries, ","), "-ca-out", ca)
	reg.Stdout, reg.Stderr = &regLog, &regLog
	if err := reg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Process.Kill(); _ = reg.Wait() })
	poll.Until(t, time.Minute, func() string { return "the test images' registry: " + regLog.String() },
		func() bool { return strings.Contains(regLog.String(), "testimages: ready") })
	appendFile(t, "/etc/hosts", "127.0.0.1 "+strings.Join(testimages.CritestRegistries, " ")+"\n")
	caPEM, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	appendFile(t, "/etc/ssl/certs/ca-certificates.crt", string(caPEM))
	images := filepath.Join(dir, "test-images.yaml")
	write(t, images, "defaultTestContainerImage: 127.0.0.1:5000/e2e-test-images/busybox:1.29-2\n"+
		"webServerTestImage: 127.0.0.1:5000/e2e-test-images/nginx:1.14-2\n")

	// jetlet.service: embedded NATS and runtime, pods on a CNI bridge with
	// portmap, as the critest stage's jetlet run.
	cni := filepath.Join(dir, "cni")
	write(t, filepath.Join(cni, "10-critest.conflist"), `{"cniVersion": "1.0.0", "name": "critest", "plugins": [
  {"type": "bridge", "bridge": "critest0", "isGateway": true,
   "ipam": {"type": "host-local", "dataDir": "`+filepath.Join(cni, "ipam")+`", "ranges": [[{"subnet": "10.88.0.0/16"}]]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}`)
	vmguest.InstallUnits(t, vmguest.Units{JetletEnv: []string{
		"JETLET_NODE=critest", "JETLET_NATS_LISTEN=127.0.0.1:0", "JETLET_HTTP_LISTEN=127.0.0.1:0",
		"JETLET_CNI_CONF_DIR=" + cni,
	}})
	vmguest.Systemctl(t, "start", "jetlet")
	t.Cleanup(func() {
		jetlettest.RemoveAllPods(t, "unix://"+socket)
		vmguest.Uninstall(t) // the next test of the run starts from no state
	})
	poll.Until(t, 2*time.Minute, func() string { return "jetlet.service serving " + socket + ": " + journal("jetlet") },
		func() bool { _, err := os.Stat(socket); return err == nil })

	critest := vmguest.Command(t, "critest")
	ginkgo := vmguest.Command(t, "ginkgo") // critest -parallel runs it from its PATH
	skipcheck := vmguest.Command(t, "skipcheck")
	specs := filepath.Join(dir, "specs.json")
	run(t, dir, critest, "-ginkgo.dry-run", "-ginkgo.no-color", "-ginkgo.json-report", specs)
	check := []string{"-skips", skipFile, "-specs", specs}
	skip := strings.TrimSpace(run(t, dir, skipcheck, append([]string{"plan"}, check...)...))
	args := []string{"-runtime-endpoint", "unix://" + socket, "-image-endpoint", "unix://" + socket,
		"-test-images-file", images, "-ginkgo.no-color", "-ginkgo.skip", skip, "-ginkgo.json-report", filepath.Join(dir, "report.json"),
		"-parallel", "4"}
	c := exec.Command(critest, args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "PATH="+filepath.Dir(ginkgo)+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, critestErr := c.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("critest exited %v; its last lines:\n%s", critestErr, strings.Join(lines[max(0, len(lines)-6):], "\n"))
	verdict, err := exec.Command(skipcheck, append([]string{"check", "-report", filepath.Join(dir, "report.json")}, check...)...).CombinedOutput()
	t.Logf("skipcheck:\n%s", verdict)
	if err != nil {
		t.Errorf("skipcheck: %v (critest: %v)", err, critestErr)
	}
	if t.Failed() {
		t.Logf("critest's output:\n%s\njetlet.service's journal:\n%s", out, journal("jetlet"))
	}
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	c.Dir = dir
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(name), strings.Join(args, " "), err)
	}
	return string(out)
}

// journal is the end of a unit's journal.
func journal(unit string) string {
	out, _ := exec.Command("journalctl", "-u", unit, "--no-pager", "-n", "60").CombinedOutput()
	return string(out)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}
