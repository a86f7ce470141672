package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/jetlettest"
)

// dirSnapshot is every path under a directory with its type, mode, size and
// modification time.
func dirSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		snap[path] = fmt.Sprintf("%v %d %d", fi.Mode(), fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// A second `jetlet run` on a data dir a running jetlet holds exits non-zero
// at once, naming the holder's pid, before it opens anything: the first one
// is stopped (SIGSTOP) meanwhile, so that nothing else changes the data dir,
// which must be exactly as it was, store included. The first one serves on.
func TestASecondRunOnALockedDataDirIsRefused(t *testing.T) {
	data := shortDir(t)
	first := startNode(t, data, "")
	pid := first.proc.Pid()
	first.proc.Signal(syscall.SIGSTOP)
	continued := false
	cont := func() {
		if !continued {
			continued = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(cont) // before the process's own cleanup, which may signal it
	if _, err := os.Stat(filepath.Join(data, "nats", "jetstream")); err != nil {
		t.Fatalf("the first jetlet's JetStream store: %v", err)
	}
	before := dirSnapshot(t, data)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	args := []string{"run", "--node", first.name, "--data-dir", data, "--nats-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}
	second := exec.CommandContext(ctx, jetlettest.Binary(t), args...)
	second.Env = append(second.Environ(), jetlettest.PodNetworkEnv(t, args)...)
	var stdout, stderr bytes.Buffer
	second.Stdout, second.Stderr = &stdout, &stderr
	err := second.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() <= 0 {
		t.Fatalf("second jetlet run: %v, want a non-zero exit; stderr:\n%s", err, stderr.String())
	}
	want := fmt.Sprintf("--data-dir %s is in use by another jetlet run (pid %d); stop it first", data, pid)
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
	}
	for _, started := range []string{"serving /healthz", "embedded NATS server", "embedded process runtime", "data dir made mode"} {
		if strings.Contains(stderr.String(), started) {
			t.Errorf("the refused jetlet logged %q:\n%s", started, stderr.String())
		}
	}
	after := dirSnapshot(t, data)
	for path, was := range before {
		if now, ok := after[path]; !ok {
			t.Errorf("the refused jetlet removed %s", path)
		} else if now != was {
			t.Errorf("the refused jetlet changed %s: %s, was %s", path, now, was)
		}
	}
	for path := range after {
		if _, ok := before[path]; !ok {
			t.Errorf("the refused jetlet made %s", path)
		}
	}

	cont()
	first.proc.WaitReady(30 * time.Second)
	if first.proc.Exited() {
		t.Fatal("the first jetlet exited")
	}
}

// asNobody runs a shell script as uid and gid 65534 with no supplementary
// groups, and returns its exit code and output.
func asNobody(t *testing.T, script string) (int, string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	}
	t.Fatalf("run %q as nobody: %v", script, err)
	return -1, ""
}

// Another local user (nobody) can neither list the data dir nor write into a
// running pod's emptyDir (0777), /dev/shm (a 1777 tmpfs) or termination
// message file (0666): their parents are closed, the data dir 0700 (an
// existing 0755 one is closed at start, logged), <data-dir>/pods 0750 and the
// runtime's dir 0700, each enough alone.
func TestOtherUsersCannotReachAPodsFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test runs commands as another user (nobody, uid 65534)")
	}
	base := shortDir(t)
	// nobody may enter base, and finds the data dir and its pods dir as a
	// jetlet before this fix left them.
	data := filepath.Join(base, "data")
	for _, dir := range []string{base, data, filepath.Join(data, "pods")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n := startNode(t, data, "")
	closed := n.proc.WaitLog("data dir made mode 0700: closed to other users", 10*time.Second)
	if closed["was"] != "0755" || closed["dir"] != data {
		t.Errorf("logged %v, want the data dir %s, was 0755", closed, data)
	}
	n.publish("tamper", podWithSpec("tamper", `"restartPolicy":"Never","terminationGracePeriodSeconds":1,
	  "volumes":[{"name":"scratch","emptyDir":{}}],
	  "containers":[{"name":"app","image":"busybox:1.36","terminationMessagePath":"/dev/termination-log",
	    "volumeMounts":[{"name":"scratch","mountPath":"/scratch"}],"command":`+shellCmd("trap 'exit 0' TERM; sleep 300 & wait")+`}]`))
	n.waitStatus("tamper", 60*time.Second, func(st *schemas.PodStatus) bool {
		return len(st.Containers) == 1 && st.Containers[0].State == schemas.ContainerRunning
	})

	// The pod's files, open to anyone but for their parents.
	emptyDir := filepath.Join(data, "pods", "tamper", "volumes", "kubernetes.io~empty-dir", "scratch")
	message := filepath.Join(data, "pods", "tamper", "containers", "app", "0")
	shms, _ := filepath.Glob(filepath.Join(data, "runtime", "sandboxes", "*", "shm"))
	if len(shms) != 1 {
		t.Fatalf("sandboxes' shm dirs: %v, want one", shms)
	}
	shm := shms[0]
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(mountinfo), " "+shm+" ") {
		t.Errorf("%s is not a mount point", shm)
	}
	for path, mode := range map[string]os.FileMode{
		data:                           os.ModeDir | 0o700,
		filepath.Join(data, "pods"):    os.ModeDir | 0o750,
		filepath.Join(data, "runtime"): os.ModeDir | 0o700,
		emptyDir:                       os.ModeDir | 0o777,
		shm:                            os.ModeDir | os.ModeSticky | 0o777,
		message:                        0o666,
	} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v (%v), want %v", path, fi.Mode(), err, mode)
		}
	}

	// The way nobody is run works: base is open to it.
	if code, out := asNobody(t, "ls "+base); code != 0 || strings.TrimSpace(out) != "data" {
		t.Fatalf("ls %s as nobody: exit %d, %q; want data", base, code, out)
	}
	tamper := func(how string) {
		t.Helper()
		for _, script := range []string{
			"ls " + data,
			"ls " + filepath.Join(data, "pods"),
			"ls " + filepath.Join(data, "runtime"),
			"touch " + filepath.Join(emptyDir, "nobody-was-here"),
			"touch " + filepath.Join(shm, "nobody-was-here"),
			"echo nobody-was-here >> " + message,
		} {
			code, out := asNobody(t, script)
			if code == 0 || !strings.Contains(out, "Permission denied") {
				t.Errorf("%s: `%s` as nobody: exit %d, %q; want Permission denied", how, script, code, out)
			}
		}
	}
	tamper("data dir 0700")
	// Each layer alone: a data dir others may enter (though not list) still
	// keeps them out of the pods' files.
	if err := os.Chmod(data, 0o711); err != nil {
		t.Fatal(err)
	}
	tamper("data dir 0711")
	if err := os.Chmod(data, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(emptyDir, "nobody-was-here"), filepath.Join(shm, "nobody-was-here")} {
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v, want none", path, err)
		}
	}
	if b, err := os.ReadFile(message); err != nil || len(b) != 0 {
		t.Errorf("termination message file: %q, %v; want empty", b, err)
	}
}
