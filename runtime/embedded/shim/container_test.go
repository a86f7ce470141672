package shim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// testPodEnv makes the test binary play a pod shim (testPodMain) running the
// plan in the file it names.
const testPodEnv = "JETLET_SHIM_TEST_POD"

func TestMain(m *testing.M) {
	if Requested() {
		os.Exit(Main())
	}
	if plan := os.Getenv(testPodEnv); plan != "" {
		os.Exit(testPodMain(plan))
	}
	if os.Getenv(testWriteExeEnv) != "" {
		os.Exit(testWriteExe())
	}
	os.Exit(m.Run())
}

// podStep is one thing the test pod does, in order.
type podStep struct {
	Dir string // a container directory holding spec.json
	// Keep leaves the container running (until the pod ends) once it printed
	// its first line.
	Keep bool
	// Exec, when set, is run with StartExec in the container of Dir, which an
	// earlier step kept running.
	Exec []string
	// Pod, when set, is run by the test pod itself, in its own namespaces.
	Pod []string
	// Leak, when set, is a host directory the test pod opens as leakedFD,
	// not close-on-exec, for the steps that follow: a descriptor a bug
	// lets a container's init inherit.
	Leak string
}

const leakedFD = 100

// stepResult is what a step did.
type stepResult struct {
	Output   string // stdout and stderr
	ExitCode int
	StartErr string
	HostPID  int
	// StartTime is how long StartContainer or StartExec took.
	StartTime time.Duration
}

// testPodMain plays the pod shim: in the new PID, UTS, IPC and mount
// namespaces runTestPod started it in, it runs the plan's steps and prints their
// results as JSON.
func testPodMain(planPath string) int {
	var plan []podStep
	data, err := os.ReadFile(planPath)
	if err == nil {
		err = json.Unmarshal(data, &plan)
	}
	if err == nil {
		err = unix.Mount("", "/", "", unix.MS_SLAVE|unix.MS_REC, "")
	}
	if err == nil {
		err = unix.Sethostname([]byte("test-pod"))
	}
	exe, _ := os.Executable()
	results := make([]stepResult, len(plan))
	hostPIDs := map[string]int{}
	for i, step := range plan {
		if err != nil {
			break
		}
		results[i], err = runStep(exe, step, hostPIDs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "test pod:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		return 1
	}
	return 0
}

func runStep(exe string, step podStep, hostPIDs map[string]int) (stepResult, error) {
	var res stepResult
	if step.Leak != "" {
		fd, err := unix.Open(step.Leak, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err == nil {
			err = unix.Dup3(fd, leakedFD, 0)
		}
		return res, err
	}
	if step.Pod != nil {
		out, err := exec.Command(step.Pod[0], step.Pod[1:]...).CombinedOutput()
		res.Output = string(out)
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			res.ExitCode, err = exit.ExitCode(), nil
		}
		return res, err
	}
	data, err := os.ReadFile(filepath.Join(step.Dir, "spec.json"))
	if err != nil {
		return res, err
	}
	var spec ContainerSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return res, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return res, err
	}
	defer outR.Close()
	var cmd *exec.Cmd
	begin := time.Now()
	if step.Exec != nil {
		cmd, err = StartExec(exe, step.Dir, &spec, hostPIDs[step.Dir], nil, step.Exec, Stdio{Out: outW, Err: outW})
	} else {
		var st *Started
		if st, err = StartContainer(exe, step.Dir, &spec, nil, Stdio{Out: outW, Err: outW}); err == nil {
			cmd, res.HostPID = st.Cmd, st.HostPID
			hostPIDs[step.Dir] = st.HostPID
		}
	}
	res.StartTime = time.Since(begin)
	outW.Close()
	if err != nil {
		res.StartErr = err.Error()
		return res, nil
	}
	if step.Keep {
		res.Output, err = bufio.NewReader(outR).ReadString('\n')
		return res, err
	}
	var out bytes.Buffer
	_, _ = out.ReadFrom(outR)
	res.Output = out.String()
	if err := cmd.Wait(); err != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	return res, nil
}

// hostState is what a container must never change on the host.
type hostState struct {
	rootMode os.FileMode
	hostname string
	mounts   []string // mount point and source of every mount
}

func captureHost(t testing.TB) hostState {
	t.Helper()
	fi, err := os.Stat("/")
	if err != nil {
		t.Fatal(err)
	}
	name, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var mounts []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		mounts = append(mounts, f[4]+" "+f[len(f)-2])
	}
	return hostState{rootMode: fi.Mode(), hostname: name, mounts: mounts}
}

// checkHostUnchanged fails t if the host differs from before in a way a test
// container could have caused. Mounts other tests on this machine may make
// under /tmp or /run are let be, unless they are under this test's dirs.
func checkHostUnchanged(t testing.TB, before hostState, ownDirs []string) {
	t.Helper()
	after := captureHost(t)
	if after.rootMode != before.rootMode {
		t.Errorf("mode of / on the host changed: %v -> %v", before.rootMode, after.rootMode)
	}
	if after.hostname != before.hostname {
		t.Errorf("host name changed: %q -> %q", before.hostname, after.hostname)
	}
	for _, m := range after.mounts {
		if slices.Contains(before.mounts, m) {
			continue
		}
		mp, _, _ := strings.Cut(m, " ")
		ours := slices.ContainsFunc(ownDirs, func(d string) bool { return under(mp, d) })
		if ours || !(under(mp, "/tmp") || under(mp, "/run")) {
			t.Errorf("a mount appeared on the host: %s", m)
		}
	}
}

// runTestPod runs steps in a test pod (a new PID, UTS, IPC and mount namespace)
// and returns their results, checking that the host is unchanged after.
func runTestPod(t testing.TB, steps ...podStep) []stepResult {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("namespaces and mounts need root")
	}
	before := captureHost(t)
	var dirs []string
	for _, s := range steps {
		if s.Dir != "" { // a pod step has none
			dirs = append(dirs, s.Dir)
		}
	}
	defer checkHostUnchanged(t, before, dirs)

	data, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	plan := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(plan, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	// Under -race a binary waits a second at exit unless told not to.
	cmd.Env = append(os.Environ(), testPodEnv+"="+plan, "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = &testWriter{t}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWPID | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWNS,
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("test pod: %v", err)
	}
	var results []stepResult
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("test pod printed %q: %v", out, err)
	}
	return results
}

type testWriter struct{ t testing.TB }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func capsOf(names []string) Capabilities {
	return Capabilities{Bounding: names, Effective: names, Permitted: names}
}

// newContainer writes a container directory whose spec runs args with
// isolation iso (nil: none); edit, when given, changes the spec further.
func newContainer(t testing.TB, iso *Isolation, edit func(*ContainerSpec), args ...string) string {
	t.Helper()
	dir := t.TempDir()
	spec := &ContainerSpec{
		Args:      args,
		Env:       []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkDir:   "/",
		Isolation: iso,
	}
	if edit != nil {
		edit(spec)
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func sh(script string) []string { return []string{"sh", "-c", script} }

func wantRun(t *testing.T, res stepResult, wantOutput ...string) {
	t.Helper()
	if res.StartErr != "" || res.ExitCode != 0 {
		t.Fatalf("start error %q, exit code %d, output:\n%s", res.StartErr, res.ExitCode, res.Output)
	}
	for _, w := range wantOutput {
		if !strings.Contains(res.Output, w) {
			t.Errorf("output lacks %q:\n%s", w, res.Output)
		}
	}
}

func TestShimContainerLeavesHostUntouched(t *testing.T) {
	etcFile := fmt.Sprintf("/etc/jetlet-shim-test-%d", os.Getpid())
	dir := newContainer(t, &Isolation{Capabilities: capsOf(AllCapabilities())}, nil, sh(
		"chmod 400 / && echo written > "+etcFile+" && mount -t tmpfs none /mnt && hostname inside && "+
			"stat -c 'mode %a' / && cat "+etcFile+" && grep -c ' /mnt ' /proc/self/mountinfo && hostname")...)
	res := runTestPod(t, podStep{Dir: dir})
	wantRun(t, res[0], "mode 400\nwritten\n1\ninside\n")
	if _, err := os.Stat(etcFile); err == nil {
		os.Remove(etcFile)
		t.Errorf("%s written inside the container appeared on the host", etcFile)
	}
}

func TestShimPrivateTmp(t *testing.T) {
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities)}
	a := newContainer(t, iso, nil, sh("echo a > /tmp/mine && ls -A /tmp")...)
	b := newContainer(t, iso, nil, "ls", "-A", "/tmp")
	res := runTestPod(t, podStep{Dir: a}, podStep{Dir: b})
	wantRun(t, res[0], "mine\n")
	wantRun(t, res[1])
	if res[1].Output != "" {
		t.Errorf("the second container's /tmp holds %q", res[1].Output)
	}
	if _, err := os.Stat("/tmp/mine"); err == nil {
		t.Error("/tmp/mine written inside the container appeared on the host")
	}
}

func TestShimVolumes(t *testing.T) {
	ro, rw := t.TempDir(), t.TempDir()
	iso := &Isolation{
		Capabilities: capsOf(defaultCapabilities),
		Mounts: []Mount{
			{Source: ro, Destination: "/data/ro", ReadOnly: true},
			{Source: rw, Destination: "/data/rw"},
		},
	}
	dir := newContainer(t, iso, nil, sh("echo no > /data/ro/f; echo yes > /data/rw/f && cat /data/rw/f")...)
	res := runTestPod(t, podStep{Dir: dir})
	wantRun(t, res[0], "Read-only file system", "yes\n")
	if _, err := os.Stat(filepath.Join(ro, "f")); err == nil {
		t.Error("the read-only volume was written")
	}
	if b, err := os.ReadFile(filepath.Join(rw, "f")); err != nil || string(b) != "yes\n" {
		t.Errorf("the host reads %q, %v from the read-write volume", b, err)
	}
}

// The test pod makes each volume's source a shared mount in its namespace,
// as a host would for a bidirectional volume, then mounts a tmpfs under each
// while the container runs, which mounts one under each of its volumes too.
// Each marks its tmpfs with a file, for the other to look for.
func TestShimVolumePropagation(t *testing.T) {
	private, slave, shared := t.TempDir(), t.TempDir(), t.TempDir()
	iso := &Isolation{
		Capabilities: capsOf(AllCapabilities()),
		Mounts: []Mount{
			{Source: private, Destination: "/private", Propagation: "rprivate"},
			{Source: slave, Destination: "/slave", Propagation: "rslave"},
			{Source: shared, Destination: "/shared", Propagation: "rshared"},
		},
	}
	dir := newContainer(t, iso, nil, sh("for v in private slave shared; do mkdir /$v/from-container && "+
		"mount -t tmpfs c /$v/from-container && touch /$v/from-container/$v || exit 1; done; echo ready; exec sleep 1000")...)
	var makeShared, mountInPod string
	for _, src := range []string{private, slave, shared} {
		makeShared += fmt.Sprintf("mount --bind %[1]s %[1]s && mount --make-shared %[1]s && ", src)
		mountInPod += fmt.Sprintf("mkdir %[1]s/from-pod && mount -t tmpfs p %[1]s/from-pod && touch %[1]s/from-pod/%[2]s && ",
			src, filepath.Base(src))
	}
	res := runTestPod(t,
		podStep{Pod: sh(makeShared + "echo shared")},
		podStep{Dir: dir, Keep: true},
		podStep{Pod: sh(mountInPod + fmt.Sprintf("ls %s/from-container %s/from-container %s/from-container", private, slave, shared))},
		podStep{Dir: dir, Exec: sh("ls /private/from-pod /slave/from-pod /shared/from-pod")},
	)
	wantRun(t, res[0], "shared")
	wantRun(t, res[1], "ready")
	wantRun(t, res[2])
	if want := fmt.Sprintf("%s/from-container:\n\n%s/from-container:\n\n%s/from-container:\nshared\n", private, slave, shared); res[2].Output != want {
		t.Errorf("what the pod sees of the container's mounts:\n%s\nwant (the rshared one only):\n%s", res[2].Output, want)
	}
	wantRun(t, res[3])
	// (ls lists its operands sorted.)
	if want := fmt.Sprintf("/private/from-pod:\n\n/shared/from-pod:\n%s\n\n/slave/from-pod:\n%s\n", filepath.Base(shared), filepath.Base(slave)); res[3].Output != want {
		t.Errorf("what the container sees of the pod's mounts:\n%s\nwant (the rslave and rshared ones):\n%s", res[3].Output, want)
	}
}

func TestShimReadonlyRootfs(t *testing.T) {
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities), ReadonlyRootfs: true}
	dir := newContainer(t, iso, nil, sh("touch /etc/x; touch /tmp/x; echo done")...)
	res := runTestPod(t, podStep{Dir: dir})
	wantRun(t, res[0], "touch: cannot touch '/etc/x': Read-only file system", "touch: cannot touch '/tmp/x': Read-only file system", "done")
}

func TestShimCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name     string
		caps     []string
		wantExit bool
	}{
		{"default", defaultCapabilities, false},
		{"drop all", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := newContainer(t, &Isolation{Capabilities: capsOf(tc.caps)}, nil, sh("touch /tmp/f && /bin/chown 1000 /tmp/f")...)
			res := runTestPod(t, podStep{Dir: dir})[0]
			if res.StartErr != "" {
				t.Fatal(res.StartErr)
			}
			if failed := res.ExitCode != 0; failed != tc.wantExit {
				t.Errorf("chown exit code %d, output %q", res.ExitCode, res.Output)
			}
		})
	}
}

func TestShimUserAndNoNewPrivs(t *testing.T) {
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities), NoNewPrivs: true}
	dir := newContainer(t, iso, func(s *ContainerSpec) {
		s.User = &User{UID: 1000, GID: 1001, Groups: []uint32{2000, 3000}}
	}, sh("id -u; id -g; id -G; grep -E '^(Uid|Gid|NoNewPrivs|CapEff)' /proc/self/status")...)
	res := runTestPod(t, podStep{Dir: dir})
	// Real, effective, saved and file system ids alike: the init sets
	// its own thread's, the one that executes the command.
	// A non-root user keeps no capability across exec (none is ambient).
	wantRun(t, res[0], "1000\n1001\n1001 2000 3000\n", "Uid:\t1000\t1000\t1000\t1000\n", "Gid:\t1001\t1001\t1001\t1001\n",
		"NoNewPrivs:\t1", "CapEff:\t0000000000000000")
}

func TestShimAmbientCapability(t *testing.T) {
	caps := Capabilities{
		Bounding: []string{"CAP_CHOWN"}, Effective: []string{"CAP_CHOWN"}, Permitted: []string{"CAP_CHOWN"},
		Inheritable: []string{"CAP_CHOWN"}, Ambient: []string{"CAP_CHOWN"},
	}
	dir := newContainer(t, &Isolation{Capabilities: caps}, func(s *ContainerSpec) {
		s.User = &User{UID: 1000, GID: 1000}
	}, sh("grep CapEff /proc/self/status; touch /tmp/f && chown 0 /tmp/f && echo chowned")...)
	res := runTestPod(t, podStep{Dir: dir})
	wantRun(t, res[0], "CapEff:\t0000000000000001", "chowned")
}

func TestShimProcIsThePods(t *testing.T) {
	dir := newContainer(t, &Isolation{Capabilities: capsOf(defaultCapabilities)}, nil, "ls", "/proc")
	res := runTestPod(t, podStep{Dir: dir})
	wantRun(t, res[0])
	var pids []string
	for _, f := range strings.Fields(res[0].Output) {
		if strings.Trim(f, "0123456789") == "" {
			pids = append(pids, f)
		}
	}
	// The test pod (1) and ls itself.
	if len(pids) != 2 || pids[0] != "1" {
		t.Errorf("/proc lists processes %v, want the pod's two", pids)
	}
	if res[0].HostPID == 0 || res[0].HostPID == 2 {
		t.Errorf("host pid %d", res[0].HostPID)
	}
}

func TestShimMaskedAndReadonlyPaths(t *testing.T) {
	iso := &Isolation{
		Capabilities:  capsOf(defaultCapabilities),
		MaskedPaths:   []string{"/proc/version", "/sys/kernel", "/no/such/path"},
		ReadonlyPaths: []string{"/proc/sys"},
	}
	dir := newContainer(t, iso, nil, sh("cat /proc/version; ls -A /sys/kernel; echo masked; echo 1 > /proc/sys/kernel/shm_rmid_forced")...)
	res := runTestPod(t, podStep{Dir: dir})[0]
	if res.StartErr != "" {
		t.Fatal(res.StartErr)
	}
	if !strings.HasPrefix(res.Output, "masked\n") || !strings.Contains(res.Output, "Read-only file system") {
		t.Errorf("output:\n%s", res.Output)
	}
}

func TestShimExecSeesTheContainer(t *testing.T) {
	dir := newContainer(t, &Isolation{Capabilities: capsOf(defaultCapabilities)}, nil, sh("echo mine > /tmp/f && echo ready && exec sleep 1000")...)
	res := runTestPod(t,
		podStep{Dir: dir, Keep: true},
		podStep{Dir: dir, Exec: sh("cat /tmp/f; hostname; grep CapEff /proc/self/status")},
		podStep{Dir: dir, Exec: []string{"nope"}},
	)
	wantRun(t, res[0], "ready\n")
	wantRun(t, res[1], "mine\ntest-pod\nCapEff:\t00000000a80425fb")
	if want := `exec: "nope": executable file not found in $PATH`; res[2].StartErr != want {
		t.Errorf("exec of an unknown command: %q, want %q", res[2].StartErr, want)
	}
}

func TestShimExecEntersTheMountNamespace(t *testing.T) {
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Skip("no nsenter:", err)
	}
	shared := t.TempDir()
	iso := &Isolation{
		Capabilities: capsOf(AllCapabilities()),
		Mounts:       []Mount{{Source: shared, Destination: "/shared", Propagation: "rshared"}},
		OwnPIDs:      true,
		Nsenter:      nsenter,
	}
	dir := newContainer(t, iso, nil, sh("mount -t tmpfs c /mnt && touch /mnt/by-container && echo ready && exec sleep 1000")...)
	res := runTestPod(t,
		podStep{Pod: sh(fmt.Sprintf("mount --bind %[1]s %[1]s && mount --make-shared %[1]s", shared))},
		podStep{Dir: dir, Keep: true},
		podStep{Dir: dir, Exec: sh("ls /mnt && mkdir /shared/m && mount -t tmpfs e /shared/m && touch /shared/m/by-exec && echo $$")},
		podStep{Pod: []string{"ls", filepath.Join(shared, "m")}},
		podStep{Dir: dir, Exec: sh("ls /shared/m; ls -l /proc/self/fd/ | grep -e spec.json -e shim -e test || echo none")},
	)
	wantRun(t, res[0])
	wantRun(t, res[1], "ready\n")
	// The exec sees the container's own mount and mounts in its namespace:
	// an rshared volume carries that mount to the pod. Its pid is the
	// container pid namespace's.
	wantRun(t, res[2], "by-container\n")
	if pid := strings.TrimPrefix(res[2].Output, "by-container\n"); pid == "\n" || len(pid) > 4 {
		t.Errorf("exec's pid %q: want a small pid of the container's namespace", pid)
	}
	wantRun(t, res[3], "by-exec\n")
	// No descriptor of the shim's (its binary, the spec) reaches the command.
	wantRun(t, res[4], "by-exec\nnone\n")
}

func TestShimStartErrors(t *testing.T) {
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities)}
	notFound := newContainer(t, iso, nil, "nope")
	badDir := newContainer(t, iso, func(s *ContainerSpec) { s.WorkDir = "/no/such/dir" }, "true")
	res := runTestPod(t, podStep{Dir: notFound}, podStep{Dir: badDir})
	if want := `exec: "nope": executable file not found in $PATH`; res[0].StartErr != want {
		t.Errorf("unknown command: %q, want %q", res[0].StartErr, want)
	}
	if want := "chdir /no/such/dir: no such file or directory"; res[1].StartErr != want {
		t.Errorf("missing working dir: %q, want %q", res[1].StartErr, want)
	}
}

// Without isolation (the runtime is not root) the command runs in this
// process's namespaces, with its environment and working dir, in its own
// session.
func TestShimWithoutIsolation(t *testing.T) {
	wd := t.TempDir()
	dir := newContainer(t, nil, func(s *ContainerSpec) {
		s.WorkDir = wd
		s.Env = append(s.Env, "GREETING=hello")
	}, sh("pwd; echo $GREETING; ps -o sid= -p $$; echo $$")...)
	st, b := runUnisolated(t, dir)
	if st.HostPID != st.Cmd.Process.Pid {
		t.Errorf("host pid %d, process %d", st.HostPID, st.Cmd.Process.Pid)
	}
	lines := strings.Fields(b)
	if len(lines) != 4 || lines[0] != wd || lines[1] != "hello" || lines[2] != lines[3] {
		t.Errorf("output %q: want the working dir, the greeting, and a session of its own", b)
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	nope := newContainer(t, nil, nil, "nope")
	if _, err := StartContainer(exe, nope, &ContainerSpec{Args: []string{"nope"}}, nil, Stdio{}); err == nil ||
		err.Error() != `exec: "nope": executable file not found in $PATH` {
		t.Errorf("unknown command: %v", err)
	}
}

// BenchmarkShimStartContainer measures StartContainer of an isolated
// container running true, one after the other in one pod, from the call to
// the command's exec. The test binary is the init here: a small shim binary
// starts faster.
func BenchmarkShimStartContainer(b *testing.B) {
	dir := newContainer(b, &Isolation{
		Capabilities:  capsOf(defaultCapabilities),
		MaskedPaths:   []string{"/proc/kcore", "/sys/firmware"},
		ReadonlyPaths: []string{"/proc/sys"},
	}, nil, "true")
	steps := make([]podStep, b.N)
	for i := range steps {
		steps[i] = podStep{Dir: dir}
	}
	b.ResetTimer()
	res := runTestPod(b, steps...)
	b.StopTimer()
	times := make([]time.Duration, len(res))
	for i, r := range res {
		if r.StartErr != "" {
			b.Fatal(r.StartErr)
		}
		times[i] = r.StartTime
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
}

// runUnisolated runs the container of dir (spec.json without isolation) in
// this process's namespaces until it ends, and returns it and its output.
func runUnisolated(t *testing.T, dir string) (*Started, string) {
	t.Helper()
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var spec ContainerSpec
	data, _ := os.ReadFile(filepath.Join(dir, "spec.json"))
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	st, err := StartContainer(exe, dir, &spec, nil, Stdio{Out: out, Err: out})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(out.Name())
	return st, string(b)
}

// connectScript tries a unix socket connect to each path it is given and
// prints the outcome (perl is Debian's essential perl-base).
const connectScript = `for s in "$@"; do perl -MSocket -e 'socket(S, PF_UNIX, SOCK_STREAM, 0) or die; ` +
	`print connect(S, sockaddr_un($ARGV[0])) ? "connected\n" : "refused: $!\n"' "$s"; done`

// The host's unix sockets do not answer in a container, neither one on the
// host's root file system nor one on a file system of its own (a separately
// mounted /run), and hidden paths are empty.
func TestShimHostSocketsAndHiddenPaths(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("namespaces and mounts need root")
	}
	base, err := os.MkdirTemp("/var/tmp", "jetlet-shim-host-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	ownFS := filepath.Join(base, "own-fs")
	hiddenDir, hiddenFile := filepath.Join(base, "hidden-dir"), filepath.Join(base, "hidden-file")
	for _, d := range []string{ownFS, hiddenDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{hiddenFile, filepath.Join(hiddenDir, "seed")} {
		if err := os.WriteFile(f, []byte("SECRET\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount("tmpfs", ownFS, "tmpfs", 0, "mode=755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(ownFS, unix.MNT_DETACH) })
	onRoot, onOwnFS := filepath.Join(base, "root.sock"), filepath.Join(ownFS, "own.sock")
	for _, path := range []string{onRoot, onOwnFS} {
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
	}

	iso := &Isolation{Capabilities: capsOf(defaultCapabilities), HiddenPaths: []string{hiddenDir, hiddenFile, "/no/such/path"}}
	script := connectScript + `; cat ` + hiddenFile + `; ls -A ` + hiddenDir + `; echo ok > ` + hiddenDir + `/mine && cat ` + hiddenDir + `/mine`
	dir := newContainer(t, iso, nil, "sh", "-c", script, "sh", onRoot, onOwnFS)
	res := runTestPod(t, podStep{Dir: dir})[0]
	wantRun(t, res)
	// Both refused, the file empty, the directory empty, then writable.
	if want := "refused: Connection refused\nrefused: Connection refused\nok\n"; res.Output != want {
		t.Errorf("output:\n%s\nwant:\n%s", res.Output, want)
	}
	if _, err := os.Stat(filepath.Join(hiddenDir, "mine")); err == nil {
		t.Error("a file written in a hidden directory appeared on the host")
	}
}

// A read-only root whose hidden path covers a host file system (a /run with
// mounts under it) starts, and is read-only.
func TestShimReadonlyRootfsWithAHiddenHostMount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("namespaces and mounts need root")
	}
	base, err := os.MkdirTemp("/var/tmp", "jetlet-shim-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	covered := filepath.Join(base, "covered")
	if err := os.Mkdir(covered, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", covered, "tmpfs", 0, "mode=755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(covered, unix.MNT_DETACH) })
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities), ReadonlyRootfs: true, HiddenPaths: []string{base}}
	dir := newContainer(t, iso, nil, sh("ls -A "+base+"; touch /etc/x; echo done")...)
	res := runTestPod(t, podStep{Dir: dir})[0]
	wantRun(t, res, "touch: cannot touch '/etc/x': Read-only file system", "done")
}

// /dev holds the default devices and those asked for, nothing else.
func TestShimDev(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse on this host")
	}
	iso := &Isolation{Capabilities: capsOf(defaultCapabilities), Devices: []Device{{HostPath: "/dev/fuse", ContainerPath: "/dev/fuse"}}}
	dir := newContainer(t, iso, nil, "ls", "-A", "/dev")
	res := runTestPod(t, podStep{Dir: dir})[0]
	wantRun(t, res)
	want := "core fd full fuse mqueue null ptmx pts random shm stderr stdin stdout tty urandom zero"
	if got := strings.Join(strings.Fields(res.Output), " "); got != want {
		t.Errorf("/dev holds %s\nwant %s", got, want)
	}
}

// A container sees its own cgroup at /sys/fs/cgroup and no other: in the
// hierarchy it has one in, that one (here the pids hierarchy on v1, the
// unified one on v2), elsewhere nothing; with CgroupNamespace (the
// runtime's choice on v2, tried here whatever the host's version) its
// command and its execs, through nsenter or not, see "/" as their cgroup.
func TestShimContainerSeesItsOwnCgroup(t *testing.T) {
	own, view, line := testCgroup(t)
	nsenter, _ := exec.LookPath("nsenter")
	for _, nsenter := range []string{"", nsenter} {
		iso := &Isolation{Capabilities: capsOf(defaultCapabilities), CgroupNamespace: true, Nsenter: nsenter, OwnPIDs: true}
		dir := newContainer(t, iso, func(s *ContainerSpec) {
			s.CgroupProcs = []string{filepath.Join(own, "cgroup.procs")}
		}, sh(`echo "$(test -e `+view+`/cgroup.procs && find `+view+` -mindepth 1 -type d | wc -l) $(grep '`+line+`' /proc/self/cgroup | cut -d: -f3)"; exec sleep 1000`)...)
		res := runTestPod(t,
			podStep{Dir: dir, Keep: true},
			podStep{Dir: dir, Exec: sh(`grep '` + line + `' /proc/self/cgroup | cut -d: -f3`)},
		)
		// Its own cgroup has no child cgroup; any other above it has one.
		wantRun(t, res[0])
		if res[0].Output != "0 /\n" {
			t.Errorf("nsenter %q: the container saw %q, want no cgroup below its own, and / as its own", nsenter, res[0].Output)
		}
		if res[1].StartErr != "" || res[1].Output != "/\n" {
			t.Errorf("nsenter %q: an exec's cgroup: %q (%s), want /", nsenter, res[1].Output, res[1].StartErr)
		}
	}
}

// testCgroup makes a cgroup under this process's in the pids hierarchy
// (cgroup v1) or the unified one (v2), removed at the end of the test. It
// returns its directory, where a container sees it, and the line of
// /proc/self/cgroup that names it.
func testCgroup(t *testing.T) (dir, view, line string) {
	t.Helper()
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var mp, path string
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && f[1] == "pids" {
			mp, path, view, line = "/sys/fs/cgroup/pids", f[2], "/sys/fs/cgroup/pids", ":pids:"
			break
		}
		if len(f) == 3 && f[0] == "0" && isCgroupHierarchy("/sys/fs/cgroup") {
			mp, path, view, line = "/sys/fs/cgroup", f[2], "/sys/fs/cgroup", "^0::"
		}
	}
	if mp == "" {
		t.Skip("no cgroup v1 pids hierarchy nor cgroup v2 at /sys/fs/cgroup")
	}
	dir = filepath.Join(mp, path, fmt.Sprintf("jetlet-shim-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove the test's cgroup: %v", err)
		}
	})
	return dir, view, line
}
