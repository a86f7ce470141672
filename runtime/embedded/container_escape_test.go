package embedded

import (
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A container of a default config, seen from an exec as kubelet makes one:
// containerd's masked and read-only paths (kubelet's defaults) hold, /sys
// is read-only, it cannot mount, it holds no descriptor of the runtime's,
// and the runtime's state dir (its shims' sockets) is not in its root.
// shim's escape_test.go attacks each of runc's published escapes.
func TestADefaultContainerHasNoWayOut(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("p", nil)
	id := h.run(sb, sbCfg, "c", "sleep", "1000")
	state := filepath.Join(h.dir, "state")
	resp, err := h.rs.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Timeout: 30, Cmd: []string{"sh", "-c", `
		for f in /proc/kcore /proc/keys /proc/timer_list /proc/acpi/*; do
			[ -e $f ] && [ "$(cat $f | wc -c)" != 0 ] && echo $f is not masked
		done
		echo h 2>/dev/null > /proc/sysrq-trigger || echo sysrq-trigger read-only
		echo 1 2>/dev/null > /proc/sys/kernel/shm_rmid_forced || echo /proc/sys read-only
		touch /sys/x 2>/dev/null || echo /sys read-only
		mount -t tmpfs t /mnt 2>/dev/null || echo no mount
		ls /proc/$$/fd
		test -e ` + state + ` || echo no state dir`}})
	if err != nil {
		t.Fatal(err)
	}
	want := "sysrq-trigger read-only\n/proc/sys read-only\n/sys read-only\nno mount\n0\n1\n2\nno state dir\n"
	if got := string(resp.GetStdout()); got != want || resp.GetExitCode() != 0 {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s\nwant stdout:\n%s", resp.GetExitCode(), got, resp.GetStderr(), want)
	}
}

// Root of a pod in a user namespace, even with CAP_SYS_ADMIN there, cannot
// mount a cgroup v1 hierarchy and set its release_agent, which the host's
// kernel runs as the host's root (CVE-2022-0492): the cgroup namespace is
// the host's user namespace's, and the write needs CAP_SYS_ADMIN there.
func TestAPodInAUserNamespaceCannotSetACgroupReleaseAgent(t *testing.T) {
	h := newHarness(t)
	requireUserns(t, h)
	sb, sbCfg := h.usernsPod("agent", testUsernsBase)
	got := h.runImage(sb, sbCfg, "c", testImage, func(c *runtimeapi.ContainerConfig) {
		c.Command = []string{"sh", "-c", `for o in rdma memory cpu pids devices none,name=jetlet; do
			mount -t cgroup -o $o cgroup /mnt 2>/dev/null || continue
			echo "$o mounted"
			if [ -e /mnt/release_agent ]; then
				agent=$(cat /mnt/release_agent)
				echo "$agent" 2>/dev/null >/mnt/release_agent && echo "$o release_agent written"
			fi
			umount /mnt
		done; echo done`}
		inPodUserns(c, sbCfg)
		c.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{AddCapabilities: []string{"SYS_ADMIN"}}
	})
	if got != "done\n" {
		t.Errorf("the pod's root printed:\n%s", got)
	}
}

// In a pod whose containers share a pid namespace (shareProcessNamespace),
// PID 1 is the pause, not the shim: a container that adds CAP_SYS_PTRACE
// (the privileged Pod Security level allows it) finds a process of no
// capability, on no root, holding nothing, in a mount namespace of nothing
// else (CAP_SYS_ADMIN lets it enter that); and no process of the host's
// (the shim) is in the namespace, for an exec either.
func TestASharedPIDNamespaceShowsNothingOfTheHost(t *testing.T) {
	h := newHarness(t)
	sb, sbCfg := h.pod("shared", nil)
	// podConfig's pid mode, unset, is POD already; said for the reader.
	sbCfg.Linux = &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD},
	}}
	sleeper := h.run(sb, sbCfg, "sleeper", "sleep", "1000")
	got := h.runImage(sb, sbCfg, "tracer", testImage, func(c *runtimeapi.ContainerConfig) {
		c.Command = []string{"sh", "-c", `
			echo "comm $(cat /proc/1/comm)"
			grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs)' /proc/1/status | tr -s '\t' ' '
			for d in /proc/1/root /proc/1/root/.. /proc/1/root/../.. /proc/1/cwd /proc/1/cwd/..; do
				echo "$d: $(ls -A $d 2>&1)"
			done
			echo "environ: $(tr '\0' ' ' < /proc/1/environ)"
			echo "fds: $(ls /proc/1/fd | tr '\n' ' ')"
			for f in /proc/1/fd/*; do [ "$(readlink $f)" = /dev/null ] || echo "$f: $(readlink $f)"; done
			echo x 2>/dev/null >> /proc/1/exe || echo "exe not writable"
			echo "mounts: $(cut -d' ' -f5,8 /proc/1/mountinfo)"
			nsenter -m/proc/1/ns/mnt ls / 2>&1
			for p in /proc/[0-9]*; do cat $p/comm; done | grep -x jetlet-shim
			echo done`}
		c.Linux = &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			Capabilities: &runtimeapi.Capability{AddCapabilities: []string{"SYS_PTRACE", "SYS_ADMIN"}},
		}}
	})
	want := `comm pause
Uid: 65535 65535 65535 65535
Gid: 65535 65535 65535 65535
Groups: 
CapInh: 0000000000000000
CapPrm: 0000000000000000
CapEff: 0000000000000000
CapBnd: 0000000000000000
CapAmb: 0000000000000000
NoNewPrivs: 1
/proc/1/root: 
/proc/1/root/..: 
/proc/1/root/../..: 
/proc/1/cwd: 
/proc/1/cwd/..: 
environ: JETLET_PROC_SHIM=pause-reap 
fds: 0 1 2 
exe not writable
mounts: / tmpfs
nsenter: can't execute 'ls': No such file or directory
done
`
	if got != want {
		t.Errorf("a container with CAP_SYS_PTRACE saw of its PID 1:\n%s\nwant:\n%s", got, want)
	}
	// Without CAP_SYS_PTRACE, not even that.
	got = h.runImage(sb, sbCfg, "default", testImage, func(c *runtimeapi.ContainerConfig) {
		c.Command = []string{"sh", "-c", `ls /proc/1/root/ 2>&1; cat /proc/1/environ 2>&1; readlink /proc/1/fd/0 || echo "fd 0 unreadable"`}
	})
	if want := "ls: /proc/1/root/: Permission denied\ncat: can't open '/proc/1/environ': Permission denied\nfd 0 unreadable\n"; got != want {
		t.Errorf("a default container saw of its PID 1:\n%s\nwant:\n%s", got, want)
	}
	resp, err := h.rs.ExecSync(ctxT(t), &runtimeapi.ExecSyncRequest{ContainerId: sleeper, Timeout: 30, Cmd: []string{"sh", "-c", `cat /proc/1/comm; for p in /proc/[0-9]*; do cat $p/comm; done | grep -x jetlet-shim; true`}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.GetStdout()); got != "pause\n" {
		t.Errorf("an exec saw PID 1 and the shim as %q, want only the pause", got)
	}
}
