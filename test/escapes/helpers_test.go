// Package escapes_test is the escape suite: one test per published escape
// class of runc, containerd and kubelet, each a pod of `jetlet run` at the
// node's default Pod Security level (baseline: no hostPath, no host
// namespaces, no privileged container) that tries the escape as an attacker
// would, then a check on the host that nothing changed and nothing outside
// the pod was read (docs/security.md, "Escapes tried").
//
// The pods report on their standard output, which the tests read from the
// container logs under the data dir; the host side plants canaries first (a
// secret file outside the data dir, a sentinel dir, the hashes of jetlet's
// binaries and the runtime's, the host's mounts) and checks them after.
//
// The embedded runtime by default; with JETLET_CRI_ENDPOINT (and
// JETLET_CRI_IMAGE, a busybox the runtime holds) the rows that do not need
// the embedded runtime run against that runtime through
// `jetlet run --runtime-endpoint` (the containerd stage,
// test/e2e/containerd/run.sh), at the same default level: that runtime
// must give pods a network of their own (a CNI conflist), and the tool
// image is imported into it with ctr.
package escapes_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/gobuild"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
	"github.com/jetlet/jetlet/test/testimages"
)

const (
	// busybox is the tests' image on the embedded runtime (jetlettest
	// imports it); toolImage is busybox with escapetool at /bin/escapetool.
	busybox   = "busybox:1.36"
	toolImage = "escapetool:1"
	// done ends every attack script's output: the pod has tried everything.
	done = "escape-attempts-done"
)

var escapeTool = &gobuild.Command{Pkg: "github.com/jetlet/jetlet/test/escapes/escapetool", Name: "escapetool", Static: true}

// runtimeUnderTest is the CRI runtime the suite targets: the embedded one,
// or JETLET_CRI_ENDPOINT's.
type runtimeUnderTest struct {
	endpoint, image string
}

func currentRuntime(t *testing.T) runtimeUnderTest {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the escape suite runs pods of the embedded runtime isolated, which needs root (CI's test stage runs as root)")
	}
	r := runtimeUnderTest{endpoint: os.Getenv("JETLET_CRI_ENDPOINT"), image: busybox}
	if r.endpoint != "" {
		if r.image = os.Getenv("JETLET_CRI_IMAGE"); r.image == "" {
			t.Fatal("JETLET_CRI_ENDPOINT is set but JETLET_CRI_IMAGE is not: name a busybox image present in the runtime")
		}
	}
	return r
}

// node is a `jetlet run` at the default Pod Security level and a
// connection to its NATS.
type node struct {
	t       *testing.T
	rt      runtimeUnderTest
	name    string
	dataDir string
	proc    *jetlettest.Process
	js      jetstream.JetStream
}

// startNode runs jetlet on a fresh data dir and waits for it. Its pods are
// removed when the test ends. A full disk of a shared machine must not
// refuse the pods: eviction thresholds are set out of the way.
func startNode(t *testing.T, extra ...string) *node {
	t.Helper()
	n := &node{t: t, rt: currentRuntime(t), name: "n1"}
	var err error
	if n.dataDir, err = os.MkdirTemp("", "jesc"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(n.dataDir) })
	args := []string{"run", "--node", n.name, "--data-dir", n.dataDir, "--http-listen", "127.0.0.1:0",
		"--nats-listen", "127.0.0.1:0", "--eviction-hard", "imagefs.available<1%,nodefs.available<1%"}
	if n.rt.endpoint != "" {
		args = append(args, "--runtime-endpoint", n.rt.endpoint)
		t.Cleanup(func() { jetlettest.RemoveAllPods(t, n.rt.endpoint) })
	} else {
		jetlettest.RemovePodsOnCleanup(t, n.dataDir)
	}
	n.proc = jetlettest.Start(t, append(args, extra...)...)
	n.proc.WaitReady(60 * time.Second)
	nc, err := nats.Connect(n.proc.NATSURL(), n.proc.NATSAuth())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if n.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	return n
}

// importTool loads toolImage into the runtime: `jetlet image import` for
// the embedded one, `ctr images import` into containerd's CRI namespace
// for another (ctr of the containerd stage's flavour is on PATH).
func (n *node) importTool() {
	n.t.Helper()
	program, err := os.ReadFile(escapeTool.Path(n.t))
	if err != nil {
		n.t.Fatal(err)
	}
	img, err := testimages.WithProgram("escapetool", program)
	if err != nil {
		n.t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := testimages.WriteOCILayout(&archive, map[string]v1.Image{"docker.io/library/" + toolImage: img}); err != nil {
		n.t.Fatal(err)
	}
	cmd := exec.Command(jetlettest.Binary(n.t), "image", "import", "--data-dir", n.dataDir, "-")
	cmd.Stdin = &archive
	if n.rt.endpoint != "" {
		sock, ok := strings.CutPrefix(n.rt.endpoint, "unix://")
		if !ok {
			n.t.Fatalf("JETLET_CRI_ENDPOINT %q: the tool image is imported with ctr, which wants a unix:// socket", n.rt.endpoint)
		}
		tar := filepath.Join(n.t.TempDir(), "escapetool.tar")
		if err := os.WriteFile(tar, archive.Bytes(), 0o600); err != nil {
			n.t.Fatal(err)
		}
		cmd = exec.Command("ctr", "--address", sock, "--namespace", "k8s.io", "images", "import", tar)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		n.t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
}

// apply publishes an apply intent for a pod of spec (its JSON members),
// whose containers' image "BUSYBOX" is the runtime's busybox.
func (n *node) apply(uid, spec string) uint64 {
	n.t.Helper()
	spec = strings.ReplaceAll(spec, `"image":"BUSYBOX"`, fmt.Sprintf(`"image":%q`, n.rt.image))
	body := fmt.Sprintf(`{"apiVersion":"jetlet.dev/v1","kind":"PodIntent","revision":1,
	  "pod":{"metadata":{"name":"p-%s","namespace":"default","uid":"%s"},"spec":{"terminationGracePeriodSeconds":1,%s}}}`, uid, uid, spec)
	ack, err := n.js.Publish(n.t.Context(), "jetlet.intent."+n.name+"."+uid, []byte(body))
	if err != nil {
		n.t.Fatal(err)
	}
	return ack.Sequence
}

// result waits for the result of intent seq of the pod.
func (n *node) result(uid string, seq uint64) schemas.SyncResult {
	n.t.Helper()
	var r schemas.SyncResult
	poll.Until(n.t, 60*time.Second, poll.Msg(fmt.Sprintf("the result of intent %d of %s", seq, uid)), func() bool {
		rs, err := jetlettest.ReadAll[schemas.SyncResult](n.js, schemas.StreamResults, "jetlet.result."+n.name+"."+uid)
		if err != nil {
			n.t.Fatal(err)
		}
		i := slices.IndexFunc(rs, func(r schemas.SyncResult) bool { return r.IntentSeq == seq })
		if i >= 0 {
			r = rs[i]
		}
		return i >= 0
	})
	return r
}

// noUserNamespaces is why jetlet refused the pod of intent seq when the
// runtime has no user namespaces (the error names pod.spec.hostUsers), on
// another runtime; any other refusal fails t, as that one does on the
// embedded runtime, which has them.
func (n *node) noUserNamespaces(t *testing.T, uid string, seq uint64) (string, bool) {
	t.Helper()
	r := n.result(uid, seq)
	if r.Outcome != schemas.OutcomeRejected {
		return "", false
	}
	if n.rt.endpoint == "" || !strings.Contains(r.Error, "pod.spec.hostUsers") {
		t.Fatalf("%s: %s %s %q: the row cannot try it", uid, r.Outcome, r.Reason, r.Error)
	}
	return r.Error, true
}

// container is a container's JSON: name, the runtime's busybox (or
// image), the shell script as its command, and more members.
func container(name, image, script string, more ...string) string {
	cmd, _ := json.Marshal([]string{"/bin/sh", "-c", script})
	if image == "" {
		image = "BUSYBOX"
	}
	return fmt.Sprintf(`{"name":%q,"image":%q,"imagePullPolicy":"IfNotPresent","command":%s%s}`,
		name, image, cmd, strings.Join(append([]string{""}, more...), ","))
}

// logs is everything the pod's container wrote on stdout and stderr, every
// restart of it in order (CRI log files under <data-dir>/logs).
func (n *node) logs(uid, ctr string) string {
	n.t.Helper()
	dir := filepath.Join(n.dataDir, "logs", fmt.Sprintf("default_p-%s_%s", uid, uid), ctr)
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	slices.SortFunc(files, func(a, b string) int { return restartOf(a) - restartOf(b) })
	var out strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			n.t.Fatal(err)
		}
		// <time> <stream> <P|F> <text>: P is a partial line, continued.
		for line := range strings.Lines(string(b)) {
			f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 4)
			if len(f) < 4 {
				continue
			}
			out.WriteString(f[3])
			if f[2] == "F" {
				out.WriteByte('\n')
			}
		}
	}
	return out.String()
}

func restartOf(path string) int {
	var n int
	fmt.Sscanf(filepath.Base(path), "%d.log", &n)
	return n
}

// emptyDir is where the pod's emptyDir vol is on the host.
func (n *node) emptyDir(uid, vol string) string {
	return filepath.Join(n.dataDir, "pods", uid, "volumes", "kubernetes.io~empty-dir", vol)
}

// exec runs `jetlet exec` in the pod's container and returns its output
// and error.
func (n *node) exec(uid, ctr string, cmd ...string) (string, error) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(n.t.Context(), 30*time.Second)
	defer cancel()
	args := append([]string{"exec", "--nats-url", n.proc.NATSURL(), "--data-dir", n.dataDir, "--node", n.name,
		"--uid", uid, "-c", ctr, "--timeout", "10s", "--"}, cmd...)
	out, err := exec.CommandContext(ctx, jetlettest.Binary(n.t), args...).CombinedOutput()
	return string(out), err
}

// canaries are what the host plants before an attack and checks after.
type canaries struct {
	t *testing.T
	// secretDir holds secret (a file of root's, 0600, outside the data
	// dir, whose content must appear in no pod's output); sentinel is a dir
	// of the host no pod may write.
	secretDir, secretPath, secret string
	// name is a file's name in secretDir, which only a listing shows.
	name     string
	sentinel string
	// seed is the data dir's NATS seed.
	seed      string
	binaries  map[string]string // path: sha256
	hostState hostState
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// plant plants the canaries of the node's host.
func plant(t *testing.T, n *node) *canaries {
	t.Helper()
	c := &canaries{t: t, secret: "jetlet-canary-secret-" + randomHex(t, 16), binaries: map[string]string{}}
	var err error
	if c.secretDir, err = os.MkdirTemp("/var/tmp", "jesc-host-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(c.secretDir) })
	// 0755, as most of a host is: a pod's non-root user that reaches it
	// lists it.
	if err := os.Chmod(c.secretDir, 0o755); err != nil {
		t.Fatal(err)
	}
	c.secretPath = filepath.Join(c.secretDir, "shadow")
	if err := os.WriteFile(c.secretPath, []byte(c.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.sentinel = filepath.Join(c.secretDir, "sentinel")
	// 0777: a pod's non-root user could write it too.
	if err := os.Mkdir(c.sentinel, 0o755); err != nil || os.Chmod(c.sentinel, 0o777) != nil {
		t.Fatal(err)
	}
	seed, err := os.ReadFile(filepath.Join(n.dataDir, "nats-client.nk"))
	if err != nil {
		t.Fatal(err)
	}
	c.seed = strings.TrimSpace(string(seed))
	bin := jetlettest.Binary(t)
	bins := []string{bin, filepath.Join(filepath.Dir(bin), "jetlet-shim")}
	if n.rt.endpoint != "" {
		// What runs a container's exec on containerd (on its PATH).
		for _, name := range []string{"runc", "containerd-shim-runc-v2"} {
			if p, err := exec.LookPath(name); err == nil {
				bins = append(bins, p)
			}
		}
	}
	for _, p := range bins {
		c.binaries[p] = hashFile(t, p)
	}
	c.name = "jetlet-canary-name-" + randomHex(t, 8)
	if err := os.WriteFile(filepath.Join(c.secretDir, c.name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.hostState = readHostState(t)
	t.Cleanup(func() { c.hostState.restore(t) })
	return c
}

// loot is a shell function, loot ROOT, that tries what an attacker would
// through ROOT, a path the pod hopes is the host's root: read the secret,
// the data dir's seed, list the secret's dir, write in the sentinel dir.
// The canary's name is not in it: only a pod that lists the host's dir
// prints it. (Not $$: jetlet expands a command's $$ to $, as kubelet.)
func (c *canaries) loot(n *node) string {
	return fmt.Sprintf(`loot() {
	  echo "loot $1: secret: $(cat "$1%[1]s" 2>&1)"
	  echo "loot $1: seed: $(cat "$1%[2]s" 2>&1)"
	  echo "loot $1: listing: $(ls -a "$1%[3]s" 2>&1 | tr '\n' ' ')"
	  touch "$1%[4]s/pwned-$(hostname)-$RANDOM" 2>/dev/null && echo "loot $1: sentinel written" || echo "loot $1: sentinel refused"
	}
	`, c.secretPath, filepath.Join(n.dataDir, "nats-client.nk"), c.secretDir, c.sentinel)
}

func hashFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// check fails the test for every canary touched: the secret or the seed in
// what the pods printed (outputs), anything in the sentinel dir, a binary
// of jetlet's changed, the host's state changed.
func (c *canaries) check(outputs ...string) {
	c.t.Helper()
	for what, canary := range map[string]string{
		"the host's secret file " + c.secretPath + " (outside the data dir)": c.secret,
		"a listing of the host's dir " + c.secretDir:                         c.name,
		"the data dir's NATS seed":                                           c.seed,
	} {
		if line, ok := lineWith(outputs, canary); ok {
			c.t.Errorf("ESCAPE: %s reached the pod's output: %q", what, line)
		}
	}
	if entries, _ := os.ReadDir(c.sentinel); len(entries) != 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		c.t.Errorf("ESCAPE: the pod wrote in the host's sentinel dir %s: %v", c.sentinel, names)
	}
	for p, h := range c.binaries {
		if got := hashFile(c.t, p); got != h {
			c.t.Errorf("ESCAPE: %s changed (sha256 %s, was %s)", p, got, h)
		}
	}
	c.hostState.check(c.t, readHostState(c.t))
}

// lineWith is the first line of outputs that holds s.
func lineWith(outputs []string, s string) (string, bool) {
	for _, out := range outputs {
		for line := range strings.Lines(out) {
			if strings.Contains(line, s) {
				return strings.TrimSpace(line), true
			}
		}
	}
	return "", false
}

// hostState is what a pod must not be able to change on the host.
type hostState struct {
	hostname, corePattern, sysrq string
	mounts                       []string
	releaseAgents                map[string]string
}

// volatileMounts are mount points other tests on a shared machine make
// and remove at any time: temporary dirs, network namespaces.
var volatileMounts = []string{os.TempDir() + "/", "/var/tmp/", "/run/netns/", "/run/user/"}

func readHostState(t *testing.T) hostState {
	t.Helper()
	var s hostState
	s.hostname, _ = os.Hostname()
	s.corePattern = readTrim("/proc/sys/kernel/core_pattern")
	s.sysrq = readTrim("/proc/sys/kernel/sysrq")
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		// mount point, root and options, not the ids, which change with
		// every mount
		f := strings.Fields(line)
		if len(f) > 5 && !slices.ContainsFunc(volatileMounts, func(p string) bool { return strings.HasPrefix(f[4]+"/", p) }) {
			s.mounts = append(s.mounts, f[4]+" "+f[3]+" "+f[5])
		}
	}
	slices.Sort(s.mounts)
	s.releaseAgents = map[string]string{}
	agents, _ := filepath.Glob("/sys/fs/cgroup/*/release_agent")
	for _, p := range agents {
		s.releaseAgents[p] = readTrim(p)
	}
	return s
}

func readTrim(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

func (before hostState) check(t *testing.T, after hostState) {
	t.Helper()
	if after.hostname != before.hostname || after.corePattern != before.corePattern || after.sysrq != before.sysrq {
		t.Errorf("ESCAPE: the host changed: hostname %q core_pattern %q sysrq %q, were %q %q %q",
			after.hostname, after.corePattern, after.sysrq, before.hostname, before.corePattern, before.sysrq)
	}
	for p, v := range after.releaseAgents {
		if v != before.releaseAgents[p] {
			t.Errorf("ESCAPE: the host's %s is %q, was %q", p, v, before.releaseAgents[p])
		}
	}
	added, removed := diff(after.mounts, before.mounts), diff(before.mounts, after.mounts)
	if len(added)+len(removed) > 0 {
		t.Errorf("ESCAPE: the host's mounts changed: added %q, removed %q", added, removed)
	}
}

// restore puts back what an escape changed of the host's kernel settings.
func (before hostState) restore(t *testing.T) {
	now := readHostState(t)
	if now.corePattern != before.corePattern {
		_ = os.WriteFile("/proc/sys/kernel/core_pattern", []byte(before.corePattern), 0)
	}
	for p, v := range now.releaseAgents {
		if v != before.releaseAgents[p] {
			_ = os.WriteFile(p, []byte(before.releaseAgents[p]+"\n"), 0)
		}
	}
}

// diff is what a holds and b does not.
func diff(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// status is the pod's stored status, nil before it has one.
func (n *node) status(uid string) *schemas.PodStatus {
	n.t.Helper()
	kv, err := n.js.KeyValue(n.t.Context(), schemas.BucketStatus)
	if err != nil {
		n.t.Fatal(err)
	}
	e, err := kv.Get(n.t.Context(), n.name+"."+uid)
	if err != nil {
		return nil
	}
	var st schemas.PodStatus
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		n.t.Fatal(err)
	}
	return &st
}

// containerStatus is the status of the pod's (init) container ctr.
func containerStatus(st *schemas.PodStatus, ctr string) (schemas.ContainerStatus, bool) {
	if st == nil {
		return schemas.ContainerStatus{}, false
	}
	for _, c := range append(slices.Clone(st.InitContainers), st.Containers...) {
		if c.Name == ctr {
			return c, true
		}
	}
	return schemas.ContainerStatus{}, false
}

// refused is why the container could not be created or started, if so.
func refused(c schemas.ContainerStatus) (string, bool) {
	switch {
	case c.State == schemas.ContainerWaiting && c.Reason != "" && c.Reason != "ContainerCreating" && c.Reason != "PodInitializing":
	case c.State == schemas.ContainerExited && (c.Reason == "StartError" || c.Reason == "ContainerCannotRun"):
	case c.LastState != nil && c.LastState.Reason == "StartError":
		return c.LastState.Reason + ": " + c.LastState.Message, true
	default:
		return "", false
	}
	return c.Reason + ": " + c.Message, true
}

// attempt waits until the container has printed done, or was refused a
// start, and returns its output and why it was refused ("" if it ran).
func (n *node) attempt(uid, ctr string, timeout time.Duration) (out, refusal string) {
	n.t.Helper()
	poll.Until(n.t, timeout, func() string {
		return fmt.Sprintf("%s/%s to print %q or be refused; status %+v; output:\n%s", uid, ctr, done, n.status(uid), out)
	}, func() bool {
		out = n.logs(uid, ctr)
		if strings.Contains(out, done) {
			return true
		}
		c, _ := containerStatus(n.status(uid), ctr)
		var ok bool
		refusal, ok = refused(c)
		return ok
	})
	return out, refusal
}

// ran fails t when the container was refused a start, where the row's
// container starts as any other and tries its escape once running: one
// that never ran tried nothing (an image the runtime cannot run, say).
func ran(t *testing.T, what, refusal string) bool {
	t.Helper()
	if refusal != "" {
		t.Errorf("%s: refused a start, so it tried nothing: %s", what, refusal)
	}
	return refusal == ""
}

// report logs what the attack got, for the suite's table.
func report(t *testing.T, what, out, refusal string) {
	t.Helper()
	if refusal != "" {
		t.Logf("%s: refused: %s\n%s", what, refusal, out)
		return
	}
	t.Logf("%s: ran:\n%s", what, out)
}
