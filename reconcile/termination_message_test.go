package reconcile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/schemas"
	"github.com/jetlet/jetlet/test/fakecri"
)

// writeTerminationMessage writes what the running instance of the named
// container says into the file mounted at its terminationMessagePath.
func writeTerminationMessage(t *testing.T, m *Kuberuntime, name, msg string) {
	t.Helper()
	st, err := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if err != nil {
		t.Fatal(err)
	}
	cs := st.FindContainerStatusByName(name)
	path := m.terminationMessageFile("uid1", name, cs.RestartCount)
	if err := os.WriteFile(path, []byte(msg), 0o644); err != nil {
		t.Fatal(err)
	}
}

func apiStatusOf(t *testing.T, m *Kuberuntime, pod *corev1.Pod) schemas.ContainerStatus {
	t.Helper()
	st, err := m.GetPodStatus(context.Background(), "uid1", "p", "ns")
	if err != nil {
		t.Fatal(err)
	}
	return m.ToAPIStatus(pod, st).Containers[0]
}

// The file at terminationMessagePath is the exited instance's message; once
// it restarted, lastState keeps how the previous instance ended.
func TestTerminationMessageFileAndLastState(t *testing.T) {
	rt := fakecri.New()
	m, _ := newTestManager(t, rt)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", TerminationMessagePath: "/dev/termination-log"})
	if err := syncOnce(t, m, pod).Error(); err != nil {
		t.Fatal(err)
	}
	// Bounded as kubelet: the last 4096 bytes.
	long := strings.Repeat("x", 5000) + "bye"
	writeTerminationMessage(t, m, "app", long)
	rt.Exit("app", 3)
	got := apiStatusOf(t, m, pod)
	if got.State != schemas.ContainerExited || got.Message != long[len(long)-4096:] {
		t.Fatalf("status %s, message of %d bytes, want exited with the file's last 4096", got.State, len(got.Message))
	}
	if got.LastState != nil {
		t.Fatalf("lastState %+v of a first instance", got.LastState)
	}
	if err := syncOnce(t, m, pod).Error(); err != nil {
		t.Fatal(err)
	}
	got = apiStatusOf(t, m, pod)
	if got.State != schemas.ContainerRunning || got.Message != "" {
		t.Fatalf("status %s %q, want running with no message", got.State, got.Message)
	}
	ls := got.LastState
	if ls == nil || ls.ExitCode != 3 || ls.Reason != schemas.ReasonError || ls.FinishedAt == "" || ls.Message != long[len(long)-4096:] {
		t.Fatalf("lastState %+v", ls)
	}
	// The new instance has a file of its own, empty.
	if b, err := os.ReadFile(m.terminationMessageFile("uid1", "app", 1)); err != nil || len(b) != 0 {
		t.Fatalf("new instance's file: %q, %v", b, err)
	}
}

// FallbackToLogsOnError: an empty file and a non-zero exit give the last 80
// lines of the log, at most 2048 bytes; a zero exit gives nothing.
func TestTerminationMessageFallsBackToTheLog(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int32
		want func(lines []string) string
	}{
		{"exit 1: the log's last lines", 1, func(lines []string) string { return strings.Join(lines[len(lines)-80:], "") }},
		{"exit 0: no message", 0, func([]string) string { return "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := fakecri.New()
			m, _ := newTestManager(t, rt)
			pod := testPod(corev1.Container{Name: "app", Image: "img:1", TerminationMessagePath: "/dev/termination-log",
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError})
			if err := syncOnce(t, m, pod).Error(); err != nil {
				t.Fatal(err)
			}
			var log strings.Builder
			var lines []string
			for i := range 100 {
				// Line 99 is written in two partial entries.
				if i == 99 {
					log.WriteString("2026-01-01T00:00:00Z stderr P part-\n")
					log.WriteString("2026-01-01T00:00:00Z stderr F two\n")
					lines = append(lines, "part-two\n")
					continue
				}
				fmt.Fprintf(&log, "2026-01-01T00:00:00Z stdout F line %d\n", i)
				lines = append(lines, fmt.Sprintf("line %d\n", i))
			}
			logPath := filepath.Join(podLogsDir(m.cfg.LogDir, "ns", "p", "uid1"), containerLogPath("app", 0))
			if err := os.WriteFile(logPath, []byte(log.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			rt.Exit("app", tc.code)
			want := tc.want(lines)
			if got := apiStatusOf(t, m, pod).Message; got != want {
				t.Fatalf("message %q\nwant %q", got, want)
			}
		})
	}
}

// Garbage collection removes an instance's termination message file with it.
func TestGarbageCollectRemovesTerminationMessageFiles(t *testing.T) {
	rt := fakecri.New()
	m, _ := newTestManager(t, rt)
	pod := testPod(corev1.Container{Name: "app", Image: "img:1", TerminationMessagePath: "/dev/termination-log"})
	for range 2 { // instances 0 and 1, both dead
		if err := syncOnce(t, m, pod).Error(); err != nil {
			t.Fatal(err)
		}
		rt.Exit("app", 1)
	}
	if err := m.GarbageCollect(context.Background(), kubecontainer.PodStateFunc(func(string) bool { return false })); err != nil {
		t.Fatal(err)
	}
	for rc, want := range []bool{false, true} { // the newest dead instance is kept
		_, err := os.Stat(m.terminationMessageFile("uid1", "app", rc))
		if exists := err == nil; exists != want {
			t.Errorf("instance %d: file exists %t, want %t", rc, exists, want)
		}
	}
}

// The termination message is read from a regular file only: a FIFO a pod
// put at its terminationMessagePath (through a subPath) does not hang the
// read, a device or a symlink is not read.
func TestTerminationMessageReadsNothingButARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo, link, file := filepath.Join(dir, "fifo"), filepath.Join(dir, "link"), filepath.Join(dir, "file")
	if err := unix.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("secret of the host"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, link, "/dev/zero"} {
		if data, err := readTail(p, maxTerminationMessageLength); err == nil {
			t.Errorf("readTail(%s) = %q, want an error", p, data)
		}
	}
	if data, err := readTail(file, maxTerminationMessageLength); err != nil || string(data) != "secret of the host" {
		t.Errorf("readTail of a regular file: %q, %v", data, err)
	}
}
