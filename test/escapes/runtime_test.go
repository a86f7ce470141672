package escapes_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/test/poll"
)

// TestProcSelfExeOverwrite is runc's CVE-2019-5736: the container makes
// its /bin/sh a script whose interpreter is /proc/self/exe, so that the
// runtime's process that executes /bin/sh in it (`jetlet exec`, an exec
// probe) executes its own binary inside the container; a process of the
// container watches /proc for such a process, opens its executable and
// tries to write it. jetlet's and jetlet-shim's binaries must be unchanged,
// and any binary the container holds must be on a read-only mount.
func TestProcSelfExeOverwrite(t *testing.T) {
	n := startNode(t)
	n.importTool()
	c := plant(t, n)
	script := `rm /bin/sh && printf '#!/proc/self/exe\n' > /bin/sh && chmod 755 /bin/sh && echo "replaced /bin/sh";
	  /bin/escapetool exewatch /ed/stop 60s; echo ` + done + `; exec /bin/busybox sleep 3600`
	n.apply("exe", `"restartPolicy":"Never","volumes":[{"name":"ed","emptyDir":{}}],"containers":[`+container("app", toolImage, script,
		`"volumeMounts":[{"name":"ed","mountPath":"/ed"}]`,
		`"readinessProbe":{"exec":{"command":["/bin/sh"]},"periodSeconds":1,"failureThreshold":1000}`)+`]`)
	poll.Until(t, 60*time.Second, poll.Msg("the watcher to start"), func() bool { return strings.Contains(n.logs("exe", "app"), "exewatch: watching") })
	// Until the watcher has seen a process not of the container's (each
	// exec's lives a few milliseconds), at most 10 times.
	for i := 0; i < 10 && !strings.Contains(n.logs("exe", "app"), "exewatch: pid "); i++ {
		out, err := n.exec("exe", "app", "/bin/sh", "-c", "true")
		t.Logf("jetlet exec %d of /bin/sh: %v: %s", i, err, out)
	}
	if err := os.WriteFile(filepath.Join(n.emptyDir("exe", "ed"), "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := n.attempt("exe", "app", 60*time.Second)
	report(t, "exe", out, "")
	// A binary the container opened may be read (runc's memfd copy is
	// too; the runtime's binary is no secret), but none may be written:
	// each it holds must lie on a read-only mount, as the runtime's sealed
	// copy does, or be a memfd.
	for line := range strings.Lines(out) {
		if strings.Contains(line, "WROTE") || strings.Contains(line, "its mount is writable") && !strings.Contains(line, " held /memfd:") {
			t.Errorf("ESCAPE: the container holds a writable binary of the host: %s", strings.TrimSpace(line))
		}
	}
	if strings.Contains(out, "open for reading: ok") && !strings.Contains(out, "its mount is") {
		t.Errorf("the watcher opened a binary but did not say what its mount is:\n%s", out)
	}
	c.check(out)
}

// TestLeakedFdWorkingDir is runc's CVE-2024-21626: a descriptor of a host
// directory left open in the process that starts the container, reached
// as the working dir /proc/self/fd/N (N from 3 to 10) or through
// /proc/<pid>/fd of every process the container sees, and in a process
// `jetlet exec` starts. From none may the host be reached. jetlet itself
// inherits a descriptor of the host's / (not close-on-exec, as a shell or a
// CI runner may leave one): the runtime must not hand it on either.
func TestLeakedFdWorkingDir(t *testing.T) {
	inherited, err := unix.Open("/", unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so closed after jetlet is gone.
	t.Cleanup(func() { unix.Close(inherited) })
	n := startNode(t)
	c := plant(t, n)
	up := strings.Repeat("../", 12)
	throughFds := c.loot(n) + `for f in /proc/[0-9]*/fd/*; do
	    [ -d "$f" ] || continue; echo "fd $f -> $(readlink $f)"; loot "$f/` + up + `"; done`
	var ctrs []string
	fds := []int{3, 4, 5, 6, 7, 8, 9, 10}
	if inherited > 10 {
		fds = append(fds, inherited)
	}
	for _, fd := range fds {
		ctrs = append(ctrs, container(fmt.Sprintf("wd%d", fd), "", c.loot(n)+`echo "cwd: $(pwd)"; loot `+up+`; echo `+done,
			fmt.Sprintf(`"workingDir":"/proc/self/fd/%d"`, fd)))
	}
	ctrs = append(ctrs, container("fds", "", throughFds+"; echo "+done+"; exec sleep 3600"))
	n.apply("fds", `"restartPolicy":"Never","containers":[`+strings.Join(ctrs, ",")+`]`)
	var outs []string
	for _, fd := range fds {
		out, refusal := n.attempt("fds", fmt.Sprintf("wd%d", fd), 90*time.Second)
		report(t, fmt.Sprintf("workingDir /proc/self/fd/%d", fd), out, refusal)
		outs = append(outs, out)
	}
	out, refusal := n.attempt("fds", "fds", 90*time.Second)
	report(t, "through /proc/*/fd", out, refusal)
	outs = append(outs, out)
	if refusal == "" && n.rt.endpoint == "" {
		out, err := n.exec("fds", "fds", "/bin/sh", "-c", throughFds+"; ls -l /proc/self/fd")
		t.Logf("jetlet exec through /proc/*/fd (%v):\n%s", err, out)
		outs = append(outs, out)
	}
	c.check(outs...)
}

// TestCgroupReleaseAgent is the kernel's CVE-2022-0492, which runtimes
// answer by what they let a container do: the container mounts cgroup v1
// hierarchies (memory, which the host has mounted, and net_cls, which it
// has not) and writes release_agent and notify_on_release, as root, in new
// user, mount and cgroup namespaces of its own (unshare -UrmC), and again
// in a pod with hostUsers false (on another runtime jetlet may refuse that
// pod, naming the field: one without user namespaces). The host's release
// agents must be unchanged and no write may succeed.
func TestCgroupReleaseAgent(t *testing.T) {
	n := startNode(t)
	n.importTool()
	c := plant(t, n)
	agent := "/jetlet-escape-agent"
	script := fmt.Sprintf(`/bin/escapetool cgroup /tmp/c %[1]s memory net_cls
	  /bin/escapetool userns-cgroup /tmp/u %[1]s memory net_cls
	  unshare -Urm sh -c 'mkdir -p /tmp/b && mount -t cgroup -o memory cgroup /tmp/b && echo "unshare -Urm: mounted" &&
	    echo %[1]s > /tmp/b/release_agent && echo "unshare -Urm: write release_agent: ok"' 2>&1
	  echo %[2]s`, agent, done)
	pods := map[string]string{"cgroup": "", "cgroup-userns": `"hostUsers":false,`}
	seqs := map[string]uint64{}
	for uid, spec := range pods {
		seqs[uid] = n.apply(uid, spec+`"restartPolicy":"Never","containers":[`+container("app", toolImage, script)+`]`)
	}
	var outs []string
	for uid := range pods {
		if why, ok := n.noUserNamespaces(t, uid, seqs[uid]); ok {
			t.Logf("%s: refused, the runtime has no user namespaces: %s", uid, why)
			continue
		}
		out, refusal := n.attempt(uid, "app", 90*time.Second)
		report(t, uid, out, refusal)
		ran(t, uid, refusal)
		outs = append(outs, out)
		if line, ok := lineWith([]string{out}, "write release_agent: ok"); ok {
			t.Errorf("ESCAPE: %s wrote a cgroup's release agent: %s", uid, line)
		}
	}
	c.check(outs...)
}

// maskedFiles and maskedDirs are the paths a container's /proc and /sys
// hide by default (containerd's list, docs/embedded-runtime.md).
var (
	maskedFiles = []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/latency_stats", "/proc/timer_stats"}
	maskedDirs  = []string{"/proc/acpi", "/proc/asound", "/proc/scsi", "/sys/firmware"}
)

// TestMaskedPathRedirect is runc's CVE-2025-31133, CVE-2025-52565 and
// CVE-2025-52881: the runtime masks /proc files by binding /dev/null over
// them (and a pty over /dev/console); a pod whose /dev is a volume of its
// own (an emptyDir where /dev/null and /dev/console are symbolic links to
// /proc/sys/kernel/core_pattern) would have the runtime bind the host's
// core_pattern there instead, writable; also as a race against a
// runtime that checks /dev/null first. The masked paths must read as
// nothing, and the host's core_pattern and sysrq stay as they were after
// the container writes through them.
//
// On another runtime whose runc predates the fix (runcUnfixed), masked
// paths that read as something are runc's escape, not jetlet's: the row
// logs them and skips, naming runc's version; the host's canaries fail it
// all the same.
func TestMaskedPathRedirect(t *testing.T) {
	n := startNode(t)
	c := plant(t, n)
	unfixed := ""
	if n.rt.endpoint != "" {
		unfixed = runcUnfixed(t)
	}
	var probe strings.Builder
	for _, p := range maskedFiles {
		// 2>&-, not 2>/dev/null: /dev/null may be the attack's.
		fmt.Fprintf(&probe, `echo "masked %[1]s: $(cat %[1]s 2>&- | wc -c)"; (echo jetlet-escape-core > %[1]s) 2>&1;`+"\n", p)
	}
	for _, p := range maskedDirs {
		fmt.Fprintf(&probe, `echo "masked %[1]s: $(ls -A %[1]s 2>&- | wc -l)";`+"\n", p)
	}
	probe.WriteString(`echo "core_pattern: $(cat /proc/sys/kernel/core_pattern)"; echo "dev: $(ls -l /dev | tr '\n' ' ')"; echo ` + done)
	links := `for d in null console tty zero; do ln -s /proc/sys/kernel/core_pattern /ed/$d; done; echo planted`
	n.apply("masked", `"restartPolicy":"Never","volumes":[{"name":"dev","emptyDir":{}}],
	  "initContainers":[`+container("plant", "", links, `"volumeMounts":[{"name":"dev","mountPath":"/ed"}]`)+`],
	  "containers":[`+container("devvol", "", probe.String(), `"volumeMounts":[{"name":"dev","mountPath":"/dev"}]`)+`,
	    `+container("tty", "", probe.String(), `"tty":true,"stdin":true,"volumeMounts":[{"name":"dev","mountPath":"/dev"}]`)+`,
	    `+container("plain", "", probe.String())+`]`)
	// The same as a race: a container swaps /dev/null in the volume between
	// the real device and the link while others are started again and
	// again (a runtime that checks what /dev/null is before it binds it).
	swap := `cd /ed && while :; do rm -f null; mknod null c 1 3; rm -f null; ln -s /proc/sys/kernel/core_pattern null; done`
	victims := []string{"r1", "r2", "r3", "r4"}
	ctrs := []string{container("swapper", "", swap, `"volumeMounts":[{"name":"dev","mountPath":"/ed"}]`)}
	for _, v := range victims {
		ctrs = append(ctrs, container(v, "", probe.String()+"; exit 1", `"volumeMounts":[{"name":"dev","mountPath":"/dev"}]`))
	}
	n.apply("masked-race", `"restartPolicy":"Always","volumes":[{"name":"dev","emptyDir":{}}],"containers":[`+strings.Join(ctrs, ",")+`]`)
	var outs, unmasked []string
	for _, ctr := range []string{"devvol", "tty", "plain"} {
		out, refusal := n.attempt("masked", ctr, 90*time.Second)
		report(t, "masked/"+ctr, out, refusal)
		outs = append(outs, out)
		unmasked = append(unmasked, notMasked(ctr, out)...)
	}
	for i, out := range n.raceStarts("masked-race", victims, 8) {
		outs = append(outs, out)
		unmasked = append(unmasked, notMasked(victims[i], out)...)
	}
	c.check(outs...)
	for _, u := range unmasked {
		if unfixed == "" {
			t.Errorf("ESCAPE: %s", u)
		} else {
			t.Logf("runc's escape: %s", u)
		}
	}
	if unfixed != "" && len(unmasked) > 0 && !t.Failed() {
		t.Skipf("%s: masked paths were not masked (logged above); the host is unchanged", unfixed)
	}
}

// notMasked says, for each masked path the probe found content in, what
// the container read.
func notMasked(ctr, out string) []string {
	var found []string
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "masked" {
			if count, err := strconv.Atoi(f[2]); err == nil && count > 0 {
				found = append(found, fmt.Sprintf("%s: %s is not masked: %s", ctr, strings.TrimSuffix(f[1], ":"), strings.TrimSpace(line)))
			}
		}
	}
	return found
}

// runcUnfixed names the runc on PATH (the one containerd runs) when it
// predates the fix of CVE-2025-31133, CVE-2025-52565 and CVE-2025-52881
// (runc 1.2.8, 1.3.3, 1.4.0), and is "" otherwise or without a runc.
func runcUnfixed(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("runc", "--version").Output()
	if err != nil {
		t.Logf("runc --version: %v: the masked path row counts any unmasked path as an escape", err)
		return ""
	}
	first, _, _ := strings.Cut(string(out), "\n")
	var major, minor, patch int
	if _, err := fmt.Sscanf(first, "runc version %d.%d.%d", &major, &minor, &patch); err != nil {
		t.Fatalf("runc --version: cannot read %q: %v", first, err)
	}
	if major == 1 && (minor < 2 || minor == 2 && patch < 8 || minor == 3 && patch < 3) {
		return fmt.Sprintf("%s predates the fix of CVE-2025-31133, CVE-2025-52565 and CVE-2025-52881 (runc 1.2.8, 1.3.3, 1.4.0)", strings.TrimSpace(first))
	}
	return ""
}

// TestInheritableCapabilities is runc's and containerd's CVE-2022-29162
// (and moby's CVE-2022-24769): a container's inheritable set must be
// empty, so that a non-root user executing a file whose inheritable file
// capabilities are all gains none; and a file with every permitted file
// capability gains nothing beyond the container's bounding set.
func TestInheritableCapabilities(t *testing.T) {
	n := startNode(t)
	n.importTool()
	// caps [PROGRAM]: the capability sets of grep run by PROGRAM (a
	// busybox), on one line, or why it could not run.
	script := `caps() { "$@" grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status 2>&1 | tr '\n\t' '  '; }
	  echo "self $(caps)"; echo "inheritable $(caps /ed/inh/busybox)"; echo "permitted $(caps /ed/perm/busybox)"; echo ` + done + "\n"
	setcaps := `mkdir /ed/inh /ed/perm && cp /bin/busybox /ed/inh/ && cp /bin/busybox /ed/perm/ &&
	  /bin/escapetool setcap /ed/inh/busybox inheritable && /bin/escapetool setcap /ed/perm/busybox permitted`
	mount := `"volumeMounts":[{"name":"ed","mountPath":"/ed"}]`
	n.apply("caps", `"restartPolicy":"Never","volumes":[{"name":"ed","emptyDir":{}}],
	  "initContainers":[`+container("setcap", toolImage, setcaps, mount)+`],
	  "containers":[`+container("root", toolImage, script, mount)+`,`+
		container("nonroot", toolImage, script, mount, `"securityContext":{"runAsUser":1000,"runAsGroup":1000}`)+`]`)
	for _, ctr := range []string{"root", "nonroot"} {
		out, refusal := n.attempt("caps", ctr, 90*time.Second)
		report(t, "caps/"+ctr, out, refusal)
		if !ran(t, "caps/"+ctr, refusal) {
			continue
		}
		sets := map[string]map[string]uint64{}
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			if len(f) == 11 {
				sets[f[0]] = map[string]uint64{}
				for i := 1; i < 11; i += 2 {
					v, _ := strconv.ParseUint(f[i+1], 16, 64)
					sets[f[0]][strings.TrimSuffix(f[i], ":")] = v
				}
			}
		}
		// The kernel refuses to execute a file whose permitted file
		// capabilities it cannot all grant (beyond the bounding set):
		// that gains nothing either.
		if line, _ := lineWith([]string{out}, "permitted "); strings.HasSuffix(strings.TrimSpace(line), "Operation not permitted") {
			sets["permitted"] = map[string]uint64{}
		}
		self, inh, perm := sets["self"], sets["inheritable"], sets["permitted"]
		if self == nil || inh == nil || perm == nil {
			t.Errorf("%s: capability sets not all printed:\n%s", ctr, out)
			continue
		}
		if self["CapInh"] != 0 || self["CapAmb"] != 0 {
			t.Errorf("ESCAPE: %s: the container's inheritable/ambient sets are %x/%x, want none", ctr, self["CapInh"], self["CapAmb"])
		}
		if ctr == "nonroot" && (inh["CapPrm"] != 0 || inh["CapEff"] != 0) {
			t.Errorf("ESCAPE: nonroot gained %x (effective %x) by executing a file with inheritable file capabilities", inh["CapPrm"], inh["CapEff"])
		}
		for name, s := range map[string]map[string]uint64{"inheritable": inh, "permitted": perm} {
			if s["CapPrm"]&^self["CapBnd"] != 0 || s["CapEff"]&^self["CapBnd"] != 0 {
				t.Errorf("ESCAPE: %s: the file with %s file capabilities got %x, beyond the bounding set %x", ctr, name, s["CapPrm"], self["CapBnd"])
			}
		}
	}
}
