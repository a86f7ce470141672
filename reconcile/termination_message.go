package reconcile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/jetlet/jetlet/reconcile/kubecontainer"
	"github.com/jetlet/jetlet/runtime/crilabels"
)

// kubelet's bounds of a termination message: the file's last 4096 bytes; from
// the log, the last 80 lines, at most 2048 bytes of them.
const (
	maxTerminationMessageLength    = 4096
	maxTerminationMessageLogLines  = 80
	maxTerminationMessageLogLength = 2048
	// logTailWindow is how much of the end of a log is read to find its
	// last lines.
	logTailWindow = 256 << 10
)

// terminationMessageFile is the host file of one instance's termination
// message: <DataDir>/pods/<uid>/containers/<name>/<restartCount>, removed
// with the instance (and with the pod's data dir).
func (m *Kuberuntime) terminationMessageFile(uid, container string, restartCount int) string {
	return filepath.Join(m.podDataDir(uid), "containers", container, strconv.Itoa(restartCount))
}

// terminationMessageMount creates the instance's empty termination message
// file (world-writable, as kubelet's: the container may run as any user) and
// returns its mount at the container's terminationMessagePath.
func (m *Kuberuntime) terminationMessageMount(pod *corev1.Pod, c *corev1.Container, restartCount int) (*runtimeapi.Mount, error) {
	path := m.terminationMessageFile(string(pod.UID), c.Name, restartCount)
	// The file is world-writable, its parents closed to the node's other
	// users (podDirMode).
	if _, err := m.makePodDataDir(string(pod.UID), "containers", c.Name); err != nil {
		return nil, fmt.Errorf("termination message file: %w", err)
	}
	if err := os.WriteFile(path, nil, 0o666); err != nil {
		return nil, fmt.Errorf("termination message file: %w", err)
	}
	// WriteFile honours the umask.
	if err := os.Chmod(path, 0o666); err != nil {
		return nil, fmt.Errorf("termination message file: %w", err)
	}
	return &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: path}, nil
}

// terminationMessage is what an exited instance said, as kubelet's
// getTerminationMessage and readLastStringFromContainerLogs: the file
// mounted at its terminationMessagePath (recorded in an annotation), and
// under FallbackToLogsOnError, when that is empty and the exit non-zero, the
// end of its log. logPath is the instance's CRI log.
func terminationMessage(s *runtimeapi.ContainerStatus, logPath string) string {
	ann := s.GetAnnotations()
	fallback := ann[crilabels.AnnotationContainerTerminationMessagePolicy] == string(corev1.TerminationMessageFallbackToLogsOnError) &&
		s.GetExitCode() != 0 && s.GetReason() != "ContainerCannotRun"
	msg, checkLogs := "", fallback
	if path := ann[crilabels.AnnotationContainerTerminationMessagePath]; path != "" {
		for _, mount := range s.GetMounts() {
			if mount.GetContainerPath() != path {
				continue
			}
			data, err := readTail(mount.GetHostPath(), maxTerminationMessageLength)
			switch {
			case os.IsNotExist(err):
			case err != nil:
				return fmt.Sprintf("Error on reading termination log %s: %v", mount.GetHostPath(), err)
			default:
				msg, checkLogs = string(data), fallback && len(data) == 0
			}
			break
		}
	}
	if checkLogs {
		msg = lastLogLines(logPath)
	}
	return msg
}

// addTerminationMessage appends the exited instance's termination message to
// the runtime's message, as kubelet does.
func (m *Kuberuntime) addTerminationMessage(cs *kubecontainer.ContainerStatus, s *runtimeapi.ContainerStatus) {
	labels := s.GetLabels()
	logPath := filepath.Join(podLogsDir(m.cfg.LogDir, labels[crilabels.LabelPodNamespace], labels[crilabels.LabelPodName], labels[crilabels.LabelPodUID]), containerLogPath(cs.Name, cs.RestartCount))
	msg := terminationMessage(s, logPath)
	if msg == "" {
		return
	}
	if cs.Message != "" {
		cs.Message += ": "
	}
	cs.Message += msg
}

// readTail reads at most the last n bytes of the regular file at path.
// The termination message's file is what the mount at the container's
// terminationMessagePath gives, which may be a volume's (a subPath bind of
// what the pod put there): a symlink is not followed, and a FIFO (whose
// open would wait for a writer) or a device is not read.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	}
	off := max(fi.Size()-n, 0)
	return io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
}

// lastLogLines is the content of the last 80 lines of a CRI log file
// (partial entries joined), cut at 2048 bytes, as kubelet reads it with
// tail 80 and limitBytes 2048; "" when the log cannot be read.
func lastLogLines(path string) string {
	data, err := readTail(path, logTailWindow)
	if err != nil {
		return ""
	}
	entries := bytes.Split(data, []byte{'\n'})
	if int64(len(data)) == logTailWindow {
		entries = entries[1:] // the first entry is cut: skip it
	}
	var lines [][]byte
	var partial []byte
	for _, e := range entries {
		// <time> <stream> <P|F> <content>
		f := bytes.SplitN(e, []byte{' '}, 4)
		if len(f) != 4 {
			continue
		}
		partial = append(partial, f[3]...)
		if string(f[2]) == "P" {
			continue
		}
		lines = append(lines, append(partial, '\n'))
		partial = nil
	}
	if len(lines) > maxTerminationMessageLogLines {
		lines = lines[len(lines)-maxTerminationMessageLogLines:]
	}
	out := bytes.Join(lines, nil)
	if len(out) > maxTerminationMessageLogLength {
		out = out[:maxTerminationMessageLogLength]
	}
	return string(out)
}
