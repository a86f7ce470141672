package shim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// These tests play a container that tries runc's published escapes on the
// shim's own defences; test/escapes attacks through jetlet run.

// inMountNamespace runs f on a thread of its own in a new mount namespace
// whose mounts reach nowhere else, and fails t with what f returns. The
// thread ends with f: its namespace goes with it.
func inMountNamespace(t testing.TB, f func() error) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("namespaces and mounts need root")
	}
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- err
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A container sharing a volume with this one swaps the mount target for a
// link to the host between the init's look and its mount (CVE-2021-30465):
// the mount lands on the directory the init opened, inside the root, and a
// read-only bind that finds another file at the path when it reopens it
// fails rather than leave the volume writable.
func TestAMountLandsOnTheTargetOpenedInTheRoot(t *testing.T) {
	root, outside, src := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "vol/sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	inMountNamespace(t, func() error {
		r, err := openContainerRoot(root)
		if err != nil {
			return err
		}
		defer r.Close()
		dst, err := r.mountPoint("/vol/sub", followLinks, true)
		if err != nil {
			return err
		}
		defer dst.Close()
		// The sibling's swap.
		if err := os.Rename(filepath.Join(root, "vol/sub"), filepath.Join(root, "vol/moved")); err != nil {
			return err
		}
		if err := os.Symlink(outside, filepath.Join(root, "vol/sub")); err != nil {
			return err
		}
		s, err := os.Open(src)
		if err != nil {
			return err
		}
		defer s.Close()
		err = r.bindIn(s, dst, "/vol/sub", followLinks, 0, true)
		if err == nil || !strings.Contains(err.Error(), "changed while it was mounted") {
			return errors.New("the read-only bind of a swapped path did not fail: " + errString(err))
		}
		if _, err := os.Stat(filepath.Join(outside, "marker")); err == nil {
			return errors.New("the bind followed the swapped link out of the root")
		}
		if _, err := os.Stat(filepath.Join(root, "vol/moved/marker")); err != nil {
			return errors.New("the bind is not on the directory the init opened: " + err.Error())
		}
		return nil
	})
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// A volume mounted on /dev whose null is a link to a host file (planted by
// the image or a sibling container) must not make a mask a bind of that file
// (CVE-2025-31133): masks bind the null device, checked as such.
func TestShimMaskIsTheNullDeviceWhateverDevHolds(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("HOST SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := t.TempDir()
	if err := os.Symlink(secret, filepath.Join(dev, "null")); err != nil {
		t.Fatal(err)
	}
	iso := &Isolation{
		Capabilities: capsOf(defaultCapabilities),
		Mounts:       []Mount{{Source: dev, Destination: "/dev"}},
		MaskedPaths:  []string{"/proc/version"},
	}
	dir := newContainer(t, iso, nil, sh("cat /proc/version; echo end")...)
	res := runTestPod(t, podStep{Dir: dir})[0]
	wantRun(t, res)
	if res.Output != "end\n" {
		t.Errorf("the masked /proc/version reads:\n%s", res.Output)
	}
}

// A masked path that is a symbolic link is refused: a mask on its target
// would leave the path open (CVE-2023-27561).
func TestShimRefusesAMaskedPathThatIsALink(t *testing.T) {
	vol := t.TempDir()
	if err := os.Symlink("/proc/cpuinfo", filepath.Join(vol, "link")); err != nil {
		t.Fatal(err)
	}
	iso := &Isolation{
		Capabilities: capsOf(defaultCapabilities),
		Mounts:       []Mount{{Source: vol, Destination: "/data"}},
		MaskedPaths:  []string{"/data/link"},
	}
	dir := newContainer(t, iso, nil, "true")
	res := runTestPod(t, podStep{Dir: dir})[0]
	if want := "masked path /data/link: a symbolic link"; !strings.HasPrefix(res.StartErr, want) {
		t.Errorf("start error %q, want %q...", res.StartErr, want)
	}
}

// An image whose /proc is a link to a host path gets no procfs mounted
// there (CVE-2019-16884): the container does not start.
func TestShimRefusesAnImageWhoseProcIsALink(t *testing.T) {
	layers := imageLayers(t)
	if err := os.Symlink(t.TempDir(), filepath.Join(layers[1], "proc")); err != nil {
		t.Fatal(err)
	}
	rootfs, _ := imageRoot(t, layers)
	dir := newContainer(t, &Isolation{Capabilities: capsOf(defaultCapabilities), Rootfs: rootfs}, nil, "ls", "/proc")
	res := runTestPod(t, podStep{Dir: dir})[0]
	if want := "/proc: a symbolic link"; !strings.HasPrefix(res.StartErr, want) {
		t.Errorf("start error %q (output %q), want %q...", res.StartErr, res.Output, want)
	}
}

// A sysctl is written only to procfs: a mount over /proc/sys does not
// take the write.
func TestSysctlIsWrittenToProcfsOnly(t *testing.T) {
	inMountNamespace(t, func() error {
		if err := unix.Mount("tmpfs", "/proc/sys", "tmpfs", 0, ""); err != nil {
			return err
		}
		if err := os.MkdirAll("/proc/sys/kernel", 0o755); err != nil {
			return err
		}
		if err := os.WriteFile("/proc/sys/kernel/shmmax", nil, 0o644); err != nil {
			return err
		}
		err := writeSysctl("kernel.shmmax", "1")
		if err == nil || !strings.Contains(err.Error(), "not on procfs") {
			return errors.New("a sysctl was written to a tmpfs: " + errString(err))
		}
		return nil
	})
}

// testWriteExeEnv makes the test binary, run by a container as the shim
// binary is by "#!/proc/self/exe", try to open its own binary for writing.
const testWriteExeEnv = "JETLET_SHIM_TEST_WRITE_EXE"

func testWriteExe() int {
	// While any process runs the binary, opening it for writing fails with
	// ETXTBSY first; what stops a write once none runs it is its mount.
	var fs unix.Statfs_t
	if err := unix.Statfs("/proc/self/exe", &fs); err != nil {
		fmt.Println(err)
		return 1
	}
	if fs.Flags&unix.ST_RDONLY == 0 {
		fmt.Println("the shim binary is on a writable mount")
		return 0
	}
	fmt.Println("the shim binary is on a read-only mount")
	return 0
}

// sealedExe's binary cannot be opened for writing.
func TestSealedExeIsReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("open_tree needs root")
	}
	path := filepath.Join(t.TempDir(), "binary")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := sealedExe(path)
	if err != nil {
		t.Fatal(err)
	}
	defer exe.Close()
	f, err := os.OpenFile(fdPath(exe), os.O_WRONLY|os.O_APPEND, 0)
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, unix.EROFS) {
		t.Errorf("open the sealed binary for writing: %v, want EROFS", err)
	}
}

// A container whose command, or an exec's, is a script run by
// "#!/proc/self/exe" runs the shim binary the init was executed from
// (CVE-2019-5736): that binary is on a read-only mount, so it cannot be
// opened for writing even once no process runs it (a busy text file can).
func TestShimContainerCannotWriteTheShimBinary(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "run"), []byte("#!/proc/self/exe\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities), Mounts: []Mount{{Source: bin, Destination: "/x"}}}
	if nsenter, err := exec.LookPath("nsenter"); err == nil {
		iso.Nsenter = nsenter
	}
	env := func(s *ContainerSpec) { s.Env = append(s.Env, testWriteExeEnv+"=1", "GORACE=atexit_sleep_ms=0") }
	script := newContainer(t, iso, env, "/x/run")
	running := newContainer(t, iso, env, sh("echo ready && exec sleep 1000")...)
	res := runTestPod(t,
		podStep{Dir: script},
		podStep{Dir: running, Keep: true},
		podStep{Dir: running, Exec: []string{"/x/run"}},
	)
	want := "the shim binary is on a read-only mount\n"
	for i, step := range []string{"the container's command", "", "an exec"} {
		if step == "" {
			continue
		}
		wantRun(t, res[i])
		if res[i].Output != want {
			t.Errorf("%s run as the shim binary: %q, want %q", step, res[i].Output, want)
		}
	}
}

// A host directory's descriptor that reaches the init (a bug's leak) is
// neither inherited by the command nor a working dir out of the root
// (CVE-2024-21626).
func TestShimLeakedDescriptorIsNoWayOut(t *testing.T) {
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "host-file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities)}
	viaFD := newContainer(t, iso, func(s *ContainerSpec) { s.WorkDir = fmt.Sprintf("/proc/self/fd/%d", leakedFD) }, "ls")
	fds := newContainer(t, iso, nil, sh("ls /proc/$$/fd")...)
	res := runTestPod(t, podStep{Leak: host}, podStep{Dir: viaFD}, podStep{Dir: fds})
	if want := fmt.Sprintf("working dir /proc/self/fd/%d is outside the container's root", leakedFD); res[1].StartErr != want {
		t.Errorf("start in the leaked directory: error %q, output %q; want %q", res[1].StartErr, res[1].Output, want)
	}
	wantRun(t, res[2])
	if res[2].Output != "0\n1\n2\n" {
		t.Errorf("the command's descriptors: %q, want 0 1 2", res[2].Output)
	}
}

// The command's inheritable set is the ambient capabilities asked for,
// none by default (containerd's since CVE-2022-29162): a program whose
// file capabilities are inheritable ones gains none of them, and file
// capabilities never pass the bounding set.
func TestShimFileCapabilitiesGainNothingBeyondTheContainers(t *testing.T) {
	grep, err := os.ReadFile("/usr/bin/grep")
	if err != nil {
		t.Skip("no /usr/bin/grep on this host:", err)
	}
	bin := t.TempDir()
	inh, perm := filepath.Join(bin, "inh-grep"), filepath.Join(bin, "perm-grep")
	// vfs_cap_data revision 2: magic and flags, then (permitted, inheritable)
	// for capabilities 0-31 and 32-63.
	const sysAdmin, netRaw = 1 << 21, 1 << 13
	for path, c := range map[string][5]uint32{
		inh:  {0x02000000, 0, sysAdmin | netRaw, 0, 0}, // inheritable only
		perm: {0x02000001, sysAdmin | netRaw, 0, 0, 0}, // permitted and effective
	} {
		if err := os.WriteFile(path, grep, 0o755); err != nil {
			t.Fatal(err)
		}
		xattr := make([]byte, 0, 20)
		for _, w := range c {
			xattr = binary.LittleEndian.AppendUint32(xattr, w)
		}
		if err := unix.Setxattr(path, "security.capability", xattr, 0); err != nil {
			t.Skip("file capabilities refused here:", err)
		}
	}
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities), Mounts: []Mount{{Source: bin, Destination: "/x"}}}
	dir := newContainer(t, iso, func(s *ContainerSpec) { s.User = &User{UID: 1000, GID: 1000} },
		sh("grep CapInh /proc/self/status; /x/inh-grep CapPrm /proc/self/status; /x/perm-grep CapPrm /proc/self/status 2>&1; true")...)
	res := runTestPod(t, podStep{Dir: dir})[0]
	// sys_admin is not in the container's bounding set: the kernel refuses
	// to run a program whose effective capabilities it cannot all grant.
	wantRun(t, res)
	want := "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n"
	if !strings.HasPrefix(res.Output, want) || !strings.Contains(res.Output, "perm-grep: Operation not permitted") {
		t.Errorf("capabilities:\n%s\nwant:\n%s<shell>: /x/perm-grep: Operation not permitted", res.Output, want)
	}
}

// A container cannot set a cgroup v1 hierarchy's release_agent, a program
// the host's kernel runs as root (CVE-2022-0492): it cannot mount one, and
// in a user and cgroup namespace of its own, where it can (no seccomp
// filter stops unshare), the kernel refuses the write (Linux 5.17, and
// stable kernels' backports). The agent written is the one already there,
// so that a vulnerable host is found, not changed.
func TestShimContainerCannotSetACgroupReleaseAgent(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare:", err)
	}
	try := `for o in rdma memory cpu pids devices none,name=jetlet; do
		mount -t cgroup -o $o cgroup /mnt 2>/dev/null || continue
		if [ -e /mnt/release_agent ]; then
			agent=$(cat /mnt/release_agent)
			echo "$agent" 2>/dev/null >/mnt/release_agent && echo "$0: $o release_agent written"
		fi
		umount /mnt
	done`
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities)}
	dir := newContainer(t, iso, nil, "sh", "-c",
		`sh -c "$0" container; unshare -UrmC sh -c "$0" "own namespaces" 2>/dev/null; echo done`, try)
	res := runTestPod(t, podStep{Dir: dir})[0]
	wantRun(t, res)
	if res.Output != "done\n" {
		t.Errorf("output:\n%s", res.Output)
	}
}

// The runtime opens an exec's terminal under the container's root: a
// container whose /dev/ptmx and /dev/pts are links to the host's makes it
// open nothing of the host (CVE-2025-52565).
func TestOpenPtyFollowsNoLinkOutOfTheContainer(t *testing.T) {
	if _, err := os.Stat("/dev/pts/ptmx"); err != nil {
		t.Skip("no devpts on this host:", err)
	}
	master, slave, err := OpenPty("/") // the shim's, the host's here
	if err != nil {
		t.Fatal(err)
	}
	master.Close()
	slave.Close()

	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"dev/ptmx": "/dev/ptmx", "dev/pts": "/dev/pts"} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	master, slave, err = OpenPty(root)
	if err == nil {
		master.Close()
		slave.Close()
		t.Fatal("a terminal was opened through the container's links to the host's devpts")
	}
	if want := root + "/dev/pts: not a directory"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want %q", err, want)
	}
}

// A volume over a file of the container's /proc is refused, but for
// lxcfs's: one over /proc/sys/kernel/cap_last_cap saying 0 made the init
// keep every capability in the bounding set, and the command, root, had
// them all (CapEff 000001fffeffffff, mount allowed).
func TestShimRefusesAMountOverProc(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "fake")
	if err := os.WriteFile(fake, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	iso := func(dst string) *Isolation {
		return &Isolation{Capabilities: capsOf(defaultCapabilities), Mounts: []Mount{{Source: fake, Destination: dst}}}
	}
	capLastCap := newContainer(t, iso("/proc/sys/kernel/cap_last_cap"), nil, "true")
	uptime := newContainer(t, iso("/proc/uptime"), nil, "cat", "/proc/uptime")
	res := runTestPod(t, podStep{Dir: capLastCap}, podStep{Dir: uptime})
	if want := "mount /proc/sys/kernel/cap_last_cap: /proc/sys/kernel/cap_last_cap is in the container's /proc, where only lxcfs's files may be mounted over"; res[0].StartErr != want {
		t.Errorf("start error %q, want %q", res[0].StartErr, want)
	}
	wantRun(t, res[1], "0\n")
}

// lastCapability is the kernel's, asked without /proc.
func TestLastCapability(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		t.Skip(err)
	}
	got, err := lastCapability()
	if err != nil || fmt.Sprint(got)+"\n" != string(b) {
		t.Errorf("lastCapability %d, %v; /proc says %s", got, err, b)
	}
}
