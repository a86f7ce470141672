package proc

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	shimEnv    = "JETLET_PROC_SHIM"
	shimDirEnv = "JETLET_PROC_SHIM_DIR"
	// shimReportFD is the pipe on which the shim tells the runtime whether the
	// process started (ExtraFiles[0]).
	shimReportFD = 3
	// shimDrainTimeout bounds how long the shim copies output after the process
	// exited (a process that escaped the group may hold the pipe).
	shimDrainTimeout = 2 * time.Second
)

// shimSpec is spec.json: everything the shim needs to run the process.
type shimSpec struct {
	Args    []string `json:"args"` // command + args, argv[0] as given
	Env     []string `json:"env"`
	WorkDir string   `json:"work_dir"`
	LogPath string   `json:"log_path,omitempty"`
	UID     *uint32  `json:"uid,omitempty"`
	GID     *uint32  `json:"gid,omitempty"`
	Groups  []uint32 `json:"groups,omitempty"`
}

// shimReport is what the shim writes on the report pipe.
type shimReport struct {
	Shim  *shimState `json:"shim,omitempty"`
	Error string     `json:"error,omitempty"`
}

// ShimRequested reports whether this process was started as a container shim
// (JETLET_PROC_SHIM=1). Every binary hosting the runtime must check it first:
//
//	if proc.ShimRequested() {
//		os.Exit(proc.ShimMain())
//	}
func ShimRequested() bool { return os.Getenv(shimEnv) == "1" }

// ShimMain runs the shim for the container directory named by
// JETLET_PROC_SHIM_DIR and returns the process exit code. The shim starts the
// container's process in its own process group, copies its output to the CRI
// log, waits for it and records its exit in exit.json. It holds shim.lock
// for its whole life, which is how the runtime tells it is alive and waits for
// it without being its parent.
func ShimMain() int {
	dir := os.Getenv(shimDirEnv)
	report := os.NewFile(shimReportFD, "report")
	if err := runShim(dir, report); err != nil {
		fmt.Fprintf(os.Stderr, "%s jetlet-proc shim %s: %v\n", time.Now().Format(time.RFC3339Nano), dir, err)
		return 1
	}
	return 0
}

func runShim(dir string, report *os.File) (err error) {
	if dir == "" {
		return errors.New(shimDirEnv + " is not set")
	}
	reported := false
	sendReport := func(rep shimReport) {
		if report == nil || reported {
			return
		}
		reported = true
		_ = json.NewEncoder(report).Encode(rep)
		report.Close()
	}
	defer func() {
		if err != nil {
			sendReport(shimReport{Error: err.Error()})
		}
	}()

	// The lock lives as long as this process; the kernel releases it when the
	// shim exits, however it exits.
	lock, err := os.OpenFile(filepath.Join(dir, "shim.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(lock)
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("another shim holds %s: %w", lock.Name(), err)
	}

	// Signals before anything else: SIGUSR1 would otherwise kill us.
	reopenCh := make(chan os.Signal, 1)
	signal.Notify(reopenCh, syscall.SIGUSR1)
	termCh := make(chan os.Signal, 1)
	signal.Notify(termCh, syscall.SIGTERM, syscall.SIGINT)
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)

	var spec shimSpec
	if err := readJSON(filepath.Join(dir, "spec.json"), &spec); err != nil {
		return err
	}
	if len(spec.Args) == 0 {
		return errors.New("spec has no command")
	}
	logw, err := openCRILog(spec.LogPath)
	if err != nil {
		return recordStartError(dir, fmt.Errorf("open log %s: %w", spec.LogPath, err), sendReport)
	}
	defer logw.close()

	cmd, outR, errR, err := startProcess(spec)
	if err != nil {
		return recordStartError(dir, err, sendReport)
	}
	st := &shimState{ShimPID: os.Getpid(), PID: cmd.Process.Pid, StartedAt: time.Now().UnixNano()}
	st.UID, st.GID = uint32(os.Getuid()), uint32(os.Getgid())
	if spec.UID != nil {
		st.UID = *spec.UID
	}
	if spec.GID != nil {
		st.GID = *spec.GID
	}
	if err := writeJSONAtomic(filepath.Join(dir, "shim.json"), st); err != nil {
		_ = syscall.Kill(-st.PID, syscall.SIGKILL)
		_ = cmd.Wait()
		return recordStartError(dir, fmt.Errorf("record start: %w", err), sendReport)
	}
	sendReport(shimReport{Shim: st})

	var copying sync.WaitGroup
	copying.Add(2)
	go func() { defer copying.Done(); logw.copyStream("stdout", outR) }()
	go func() { defer copying.Done(); logw.copyStream("stderr", errR) }()

	waitErr := make(chan error, 1)
	go func() { waitErr <- cmd.Wait() }()
	var werr error
loop:
	for {
		select {
		case werr = <-waitErr:
			break loop
		case <-reopenCh:
			nonce, _ := os.ReadFile(filepath.Join(dir, "reopen.req"))
			msg := ""
			if err := logw.reopen(); err != nil {
				msg = err.Error()
			}
			_ = writeJSONAtomic(filepath.Join(dir, "reopen.ack"), reopenAck{Nonce: strings.TrimSpace(string(nonce)), Error: msg})
		case sig := <-termCh:
			_ = syscall.Kill(-st.PID, sig.(syscall.Signal))
		}
	}
	finished := time.Now().UnixNano()
	// Like the end of a pid namespace: when the main process is gone, whatever
	// is left in its process group goes too.
	_ = syscall.Kill(-st.PID, syscall.SIGKILL)

	drained := make(chan struct{})
	go func() { copying.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(shimDrainTimeout):
		outR.Close()
		errR.Close()
		<-drained
	}

	ex := &exitState{FinishedAt: finished}
	var ee *exec.ExitError
	switch {
	case werr == nil:
		ex.ExitCode = 0
	case errors.As(werr, &ee):
		ex.ExitCode = exitCode(ee)
	default:
		ex.ExitCode = shimLostCode
		ex.Reason = reasonUnknown
		ex.Message = werr.Error()
	}
	if err := writeJSONAtomic(filepath.Join(dir, "exit.json"), ex); err != nil {
		return err
	}
	// The exit is recorded: let watchers go now rather than when this process
	// is gone (a race-enabled binary lingers a second at exit).
	return lock.Close()
}

type reopenAck struct {
	Nonce string `json:"nonce"`
	Error string `json:"error,omitempty"`
}

// exitCode is the container-style exit code of an exited process: its exit
// status, or 128 plus the signal that killed it.
func exitCode(ee *exec.ExitError) int32 {
	ws, _ := ee.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(ws.ExitStatus())
}

func recordStartError(dir string, cause error, sendReport func(shimReport)) error {
	ex := &exitState{
		ExitCode: startErrorCode, FinishedAt: time.Now().UnixNano(),
		Reason: reasonStartError, Message: cause.Error(),
	}
	if err := writeJSONAtomic(filepath.Join(dir, "exit.json"), ex); err != nil {
		return fmt.Errorf("%v (and recording it failed: %w)", cause, err)
	}
	sendReport(shimReport{Error: cause.Error()})
	return nil
}

// startProcess starts spec's process in its own process group with stdin on
// /dev/null and stdout and stderr on pipes.
func startProcess(spec shimSpec) (*exec.Cmd, *os.File, *os.File, error) {
	path, err := lookPath(spec.Args[0], spec.Env)
	if err != nil {
		return nil, nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, nil, err
	}
	cmd := &exec.Cmd{
		Path:        path,
		Args:        spec.Args,
		Env:         spec.Env,
		Dir:         spec.WorkDir,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: procAttr(spec.UID, spec.GID, spec.Groups),
	}
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, nil, nil, err
	}
	return cmd, outR, errR, nil
}

// procAttr puts the process in its own process group, as the given user when
// one is set.
func procAttr(uid, gid *uint32, groups []uint32) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	if uid != nil {
		cred := &syscall.Credential{Uid: *uid, Groups: groups}
		if gid != nil {
			cred.Gid = *gid
		}
		attr.Credential = cred
	}
	return attr
}

// lookPath resolves name against the container's PATH, not the shim's.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if err := isExecutable(name); err != nil {
			return "", fmt.Errorf("exec: %q: %w", name, err)
		}
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, name)
		if isExecutable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec: %q: executable file not found in $PATH", name)
}

func isExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	if fi.Mode()&0o111 == 0 {
		return os.ErrPermission
	}
	return nil
}
