package e2e_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
	"github.com/jetlet/jetlet/test/poll"
)

// The tests below check, through `jetlet run` as root, that the embedded
// runtime's pods cannot change the host (docs/embedded-runtime.md).

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("isolation needs jetlet to run as root")
	}
}

// hostState is what a container must not be able to change.
type hostState struct {
	hostname, shmRmidForced, mounts string
	rootMode                        os.FileMode
}

func readHostState(t *testing.T) hostState {
	t.Helper()
	var s hostState
	s.hostname, _ = os.Hostname()
	b, _ := os.ReadFile("/proc/sys/kernel/shm_rmid_forced")
	s.shmRmidForced = string(b)
	var mounts []string
	b, _ = os.ReadFile("/proc/self/mountinfo")
	for line := range strings.Lines(string(b)) {
		// mount point and source, not the ids, which change with every mount
		f := strings.Fields(line)
		if len(f) > 4 && !strings.HasPrefix(f[4], os.TempDir()) {
			mounts = append(mounts, f[4]+" "+f[3])
		}
	}
	s.mounts = strings.Join(mounts, "\n")
	fi, err := os.Stat("/")
	if err != nil {
		t.Fatal(err)
	}
	s.rootMode = fi.Mode()
	return s
}

// waitFile waits for the file at path to hold a line, and returns it.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	var got string
	poll.Until(t, 60*time.Second, poll.Msg(path), func() bool {
		b, err := os.ReadFile(path)
		got = strings.TrimSpace(string(b))
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	return got
}

// A privileged pod renames its host, sets an IPC sysctl, mounts a tmpfs and
// makes / unreadable: each of which works, inside the pod only.
func TestAPrivilegedPodCannotChangeTheHost(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	before := readHostState(t)
	n := startNode(t, shortDir(t), "", "--allow-privileged")
	vol, mount := sharedVolume(dir)
	n.publish("bully", podWithSpec("bully", vol+`,"restartPolicy":"Never",
	  "containers":[{"name":"app","image":"busybox:1.36","securityContext":{"privileged":true},`+mount+`,"command":`+shellCmd(
		`hostname renamed-by-pod && echo 1 > /proc/sys/kernel/shm_rmid_forced && mkdir -p /mnt && mount -t tmpfs none /mnt && chmod 400 / &&
		 echo "$(hostname) $(cat /proc/sys/kernel/shm_rmid_forced) $(grep -c ' /mnt ' /proc/self/mountinfo) $(stat -c %a /)" > /shared/seen;
		 exec sleep 300`)+`}]`))
	if got, want := waitFile(t, filepath.Join(dir, "seen")), "renamed-by-pod 1 1 400"; got != want {
		t.Fatalf("inside the pod: %q, want %q (each change made)", got, want)
	}
	after := readHostState(t)
	if after.hostname != before.hostname || after.shmRmidForced != before.shmRmidForced || after.rootMode != before.rootMode {
		t.Fatalf("the host changed: %+v, was %+v", after, before)
	}
	if after.mounts != before.mounts {
		t.Fatalf("the host's mounts changed:\n%s\nwere\n%s", after.mounts, before.mounts)
	}
}

// A container's capabilities, read-only volumes and /tmp are its own.
func TestContainerCapabilitiesVolumesAndTmp(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "owned"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, shortDir(t), "", mountsTheHost...)
	vol, mount := sharedVolume(dir)
	roVol := `,{"name":"ro","hostPath":{"path":` + strconv.Quote(dir) + `,"type":"Directory"}}]`
	vol = strings.TrimSuffix(vol, "]") + roVol
	n.publish("caps", podWithSpec("caps", vol+`,"restartPolicy":"Never","containers":[
	  {"name":"dropall","image":"busybox:1.36","securityContext":{"capabilities":{"drop":["ALL"]}},`+mount+`,"command":`+shellCmd(
		`chown 1000 /shared/owned 2>/dev/null && echo chowned > /shared/dropall || echo refused > /shared/dropall`)+`},
	  {"name":"default","image":"busybox:1.36",`+mount+`,"command":`+shellCmd(
		`chown 1000 /shared/owned && echo chowned > /shared/default || echo refused > /shared/default`)+`},
	  {"name":"readonly","image":"busybox:1.36","volumeMounts":[{"name":"shared","mountPath":"/shared"},{"name":"ro","mountPath":"/ro","readOnly":true}],"command":`+shellCmd(
		`touch /ro/x 2>/dev/null && echo written > /shared/readonly || echo refused > /shared/readonly`)+`}]`))
	for file, want := range map[string]string{"dropall": "refused", "default": "chowned", "readonly": "refused"} {
		if got := waitFile(t, filepath.Join(dir, file)); got != want {
			t.Errorf("%s: %q, want %q", file, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("the read-only volume was written")
	}

	// Two pods, each its own /tmp, neither the host's.
	for _, uid := range []string{"tmp-a", "tmp-b"} {
		n.publish(uid, podWithSpec(uid, vol+`,"restartPolicy":"Never","containers":[{"name":"app","image":"busybox:1.36",`+mount+`,"command":`+shellCmd(
			`ls /tmp | wc -l > /shared/`+uid+`.before; echo `+uid+` > /tmp/jetlet-mark; cat /tmp/jetlet-mark > /shared/`+uid)+`}]`))
	}
	for _, uid := range []string{"tmp-a", "tmp-b"} {
		if got := waitFile(t, filepath.Join(dir, uid)); got != uid {
			t.Errorf("%s read %q from its /tmp", uid, got)
		}
		if got := waitFile(t, filepath.Join(dir, uid+".before")); got != "0" {
			t.Errorf("%s found %s entries in a fresh /tmp", uid, got)
		}
	}
	if _, err := os.Stat("/tmp/jetlet-mark"); err == nil {
		t.Error("a pod's /tmp/jetlet-mark reached the host's /tmp")
	}
}

// A container limited to 64 MiB that allocates 256 MiB is OOM-killed and
// says so.
func TestMemoryLimitEndsOOMKilled(t *testing.T) {
	requireRoot(t)
	n := startNode(t, shortDir(t), "")
	n.publish("hog", podWithSpec("hog", `"restartPolicy":"Never","containers":[{"name":"app","image":"busybox:1.36",
	  "resources":{"limits":{"memory":"64Mi"}},"command":`+shellCmd("dd if=/dev/zero of=/dev/null bs=256M count=1")+`}]`))
	st := n.waitStatus("hog", 60*time.Second, func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && st.Containers[0].State == schemas.ContainerExited
	})
	if c := st.Containers[0]; c.Reason != "OOMKilled" || c.ExitCode != 137 {
		t.Fatalf("container ended %d %q, want 137 OOMKilled", c.ExitCode, c.Reason)
	}
}

// A pod's Localhost seccomp profile, a file under <data-dir>/seccomp, holds
// for its containers: this one denies mkdir.
func TestAPodsLocalhostSeccompProfileDeniesMkdir(t *testing.T) {
	requireRoot(t)
	dir, data := t.TempDir(), shortDir(t)
	if err := os.MkdirAll(filepath.Join(data, "seccomp"), 0o755); err != nil {
		t.Fatal(err)
	}
	profile := `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO"}]}`
	if err := os.WriteFile(filepath.Join(data, "seccomp", "deny-mkdir.json"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, data, "", mountsTheHost...)
	vol, mount := sharedVolume(dir)
	n.publish("nomkdir", podWithSpec("nomkdir", vol+`,"restartPolicy":"Never",
	  "securityContext":{"seccompProfile":{"type":"Localhost","localhostProfile":"deny-mkdir.json"}},
	  "containers":[{"name":"app","image":"busybox:1.36",`+mount+`,"command":`+shellCmd(
		`{ mkdir /tmp/d 2>&1; grep Seccomp: /proc/self/status; } > /shared/.seen; mv /shared/.seen /shared/seen`)+`}]`))
	got := waitFile(t, filepath.Join(dir, "seen"))
	if want := "mkdir: can't create directory '/tmp/d': Operation not permitted\nSeccomp:\t2"; got != want {
		t.Fatalf("in the pod:\n%s\nwant:\n%s", got, want)
	}

	// A container whose profile file is missing is not created, and its
	// status says which file.
	n.publish("noprofile", podWithSpec("noprofile", `"restartPolicy":"Never","containers":[{"name":"app","image":"busybox:1.36",
	  "securityContext":{"seccompProfile":{"type":"Localhost","localhostProfile":"missing.json"}},"command":`+shellCmd("true")+`}]`))
	missing := filepath.Join(data, "seccomp", "missing.json")
	n.waitStatus("noprofile", 60*time.Second, func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && st.Containers[0].State == schemas.ContainerWaiting &&
			st.Containers[0].Reason == "CreateContainerError" && strings.Contains(st.Containers[0].Message, missing)
	})
}

// A pod of the default runtime sees nothing of its node that would give it
// the node: not the data dir (its NATS seed, the runtime's socket), not
// jetlet's binary, not a unix socket of the host on a file system of its own,
// not /etc/shadow, not a host device it makes (the host's RNG).
func TestAPodSeesNothingOfTheNode(t *testing.T) {
	requireRoot(t)
	shared := t.TempDir()
	dataDir, err := os.MkdirTemp("/var/tmp", "je2e") // not /tmp: a container's /tmp is its own anyway
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dataDir) })
	sockFS, err := os.MkdirTemp("/var/tmp", "je2e-sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockFS) })
	if err := unix.Mount("tmpfs", sockFS, "tmpfs", 0, "mode=755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(sockFS, unix.MNT_DETACH) })
	sock := filepath.Join(sockFS, "host.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })

	n := startNode(t, dataDir, "", mountsTheHost...)
	seed := filepath.Join(dataDir, "nats-client.nk")
	if _, err := os.Stat(seed); err != nil {
		t.Fatalf("the node has no seed to hide: %v", err)
	}
	bin := jetlettest.Binary(t)
	vol, mount := sharedVolume(shared)
	script := fmt.Sprintf(`{
	  [ -e %[1]s ] && echo "data dir: $(ls -A %[1]s | wc -l) entries" || echo "data dir: absent"
	  echo "seed: $(cat %[2]s 2>/dev/null | wc -c) bytes"
	  echo "jetlet: $(cat %[3]s 2>/dev/null | wc -c) bytes"
	  echo "shadow: $(cat /etc/shadow 2>/dev/null | wc -c) bytes"
	  [ -e %[4]s ] && echo "socket: present" || echo "socket: absent"
	  mknod /dev/hw c 10 183 && head -c 1 /dev/hw >/dev/null 2>&1 && echo "rng: read" || echo "rng: refused"
	} > /shared/seen.tmp; mv /shared/seen.tmp /shared/seen`, dataDir, seed, bin, sock)
	n.publish("nosy", podWithSpec("nosy", vol+`,"restartPolicy":"Never","containers":[{"name":"app","image":"busybox:1.36",`+mount+`,"command":`+shellCmd(script)+`}]`))
	want := "data dir: absent\nseed: 0 bytes\njetlet: 0 bytes\nshadow: 0 bytes\nsocket: absent\nrng: refused"
	if got := waitFile(t, filepath.Join(shared, "seen")); got != want {
		t.Fatalf("what the pod saw of its node:\n%s\nwant:\n%s", got, want)
	}
}

// A pod with hostUsers false, through `jetlet run` and its embedded runtime:
// its root is 65536 ids of the node's range from 65536 up, never the host's
// root, and a hostPath it writes keeps the host's owners (idmapped).
func TestAPodWithoutHostUsersIsNotRootOnTheHost(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	// Not a test of disk pressure: a shared machine's full disk must not
	// refuse the pod.
	n := startNode(t, shortDir(t), "", append(mountsTheHost, "--eviction-hard", "imagefs.available<1%,nodefs.available<1%")...)
	vol, mount := sharedVolume(dir)
	n.publish("userns", podWithSpec("userns", vol+`,"restartPolicy":"Never","hostUsers":false,
	  "containers":[{"name":"app","image":"busybox:1.36",`+mount+`,"command":`+shellCmd(
		`echo "$(id -u) $(cat /proc/self/uid_map)" > /shared/seen; exec sleep 300`)+`}]`))
	if r := n.results("userns", 1)[0]; r.Outcome != schemas.OutcomeSynced {
		t.Fatalf("apply: %s %s %+v", r.Outcome, r.Error, r.Actions)
	}
	var inside, first, length, host uint64
	got := waitFile(t, filepath.Join(dir, "seen"))
	if _, err := fmt.Sscan(got, &inside, &host, &first, &length); err != nil || inside != 0 || host != 0 || length != 65536 || first < 65536 || first%65536 != 0 {
		t.Fatalf("the pod's root and uid_map: %q (%v), want uid 0 mapped to an aligned range from 65536 up", got, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "seen"), &st); err != nil || st.Uid != 0 {
		t.Errorf("the file the pod's root wrote is the host's uid %d (%v), want 0 (idmapped volume)", st.Uid, err)
	}
}
