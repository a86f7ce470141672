package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/jetlet/jetlet/internal/atomicfile"
)

// drainTimeout bounds how long output is copied after a container's command
// exited (a process that escaped its group may hold the pipe).
const drainTimeout = 2 * time.Second

// podShim is one pod's supervisor. Started by the runtime in the pod's new
// namespaces, it is their first process (PID 1 of the pod's pid namespace
// when each container has its own inside it; with one the containers share,
// the pause is, and the shim stays in the host's): it reaps whatever is
// orphaned in the pod, starts containers and execs as its children, copies
// their output to the CRI logs and records their exits. It ends when the
// runtime kills it, and the kernel then kills everything left in the pod.
type podShim struct {
	dir     string
	exe     string // this binary, re-executed as each container's init
	hostPID int    // this process in the runtime's pid namespace
	// pauseReady, made before the shim serves when the pod's containers
	// share a pid namespace (PodSpec.SharedPIDs), is closed once the
	// pause holds it; podPIDs, that namespace, is written before and read
	// after (podPIDNamespace).
	pauseReady chan struct{}
	podPIDs    *os.File

	// reapMu is held from a child's fork until it is registered in waiters, so
	// the reaper cannot take its exit for an orphan's.
	reapMu  sync.Mutex
	waiters map[int]chan syscall.WaitStatus // pid (this pid namespace) -> its exit

	mu      sync.Mutex
	running map[string]*running // container dir -> its running command
	// stopping, guarded by mu, is set by a SIGTERM (systemd stopping the
	// pod's scope as the host shuts down, or an operator): the shim starts
	// no container any more and ends with the last that runs.
	stopping bool
}

// errStopping refuses a container start once the shim has had SIGTERM.
var errStopping = errors.New("the pod shim is stopping (it had SIGTERM)")

// running is a container whose command runs under this shim.
type running struct {
	spec    *ContainerSpec
	hostPID int
	log     *criLog
	output  *fanout // the command's output to attached clients

	// terminal is the master of the command's terminal (spec.Tty), which
	// attached clients resize; nil without. Closed by supervise.
	terminal *os.File

	stdinMu sync.Mutex
	// stdin is written for the command's stdin (spec.Stdin): a pipe's write
	// end, or the terminal's master; nil without, or once closed. Guarded by
	// stdinMu.
	stdin *os.File
}

func runPod(dir string, report *os.File) (err error) {
	if dir == "" {
		return errors.New(DirEnv + " is not set")
	}
	sendReport := func(msg string) {
		if report != nil {
			_, _ = report.WriteString(msg + "\n")
			report.Close()
			report = nil
		}
	}
	defer func() {
		if err != nil {
			sendReport("error " + err.Error())
		}
	}()
	if err := os.Chdir(dir); err != nil {
		return err
	}
	// Held for this process's life: the runtime tells the shim lives by it.
	lock, err := os.OpenFile("shim.lock", os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	// Not collected (its finalizer would close it and release the lock).
	defer runtime.KeepAlive(lock)
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("another shim holds %s: %w", lock.Name(), err)
	}
	// The lock names its holder: a runtime that died before it read the
	// report finds the shim to kill there (ShimPIDFromLock).
	hostPID, err := selfHostPID()
	if err != nil {
		return err
	}
	if _, err := lock.WriteAt([]byte(strconv.Itoa(hostPID)), 0); err != nil {
		return fmt.Errorf("write %s: %w", lock.Name(), err)
	}
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE, syscall.SIGINT)

	var spec PodSpec
	if err := atomicfile.ReadJSON("pod.json", &spec); err != nil {
		return err
	}
	if err := setUpPod(&spec); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	p := &podShim{dir: dir, exe: exe, hostPID: hostPID, waiters: map[int]chan syscall.WaitStatus{}, running: map[string]*running{}}

	// Orphans of the pod come to this process whether or not it is PID 1.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become the pod's subreaper: %w", err)
	}
	sigchld := make(chan os.Signal, 16)
	signal.Notify(sigchld, syscall.SIGCHLD)
	go p.reap(sigchld)
	// No process of the pod sees the shim (it is their pid namespace's
	// parent, or outside it): a SIGTERM is the host's.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go p.stopOnTerm(term)
	if spec.SharedPIDs {
		if err := p.startPause(); err != nil {
			return err
		}
	}

	_ = os.Remove(SocketName)
	lis, err := listenUnix(SocketName)
	if err != nil {
		return err
	}
	sendReport("ready " + strconv.Itoa(hostPID))
	for {
		conn, err := acceptUnix(lis)
		if err != nil {
			return err
		}
		go p.serve(conn)
	}
}

// setUpPod applies spec in the namespaces this process was started in.
func setUpPod(spec *PodSpec) error {
	if spec.Hostname != "" {
		if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
			return fmt.Errorf("set the pod's host name: %w", err)
		}
	}
	for k, v := range spec.Sysctls {
		if err := writeSysctl(k, v); err != nil {
			return fmt.Errorf("sysctl %s=%s: %w", k, v, err)
		}
	}
	return nil
}

// ShimPIDFromLock reads the host pid a pod shim wrote into its sandbox's
// shim.lock once it held it; 0 when there is none.
func ShimPIDFromLock(lockPath string) int {
	data, err := os.ReadFile(lockPath)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(string(data))
	return pid
}

// selfHostPID is this process's pid in the pid namespace of the /proc it sees,
// the runtime's (a pod shim keeps the host's /proc mounted).
func selfHostPID() (int, error) {
	s, err := os.Readlink("/proc/self")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(s)
}

// reap collects every child that ends: a container's or an exec's command
// goes to its waiter, an orphan is just reaped.
func (p *podShim) reap(sigchld <-chan os.Signal) {
	for range sigchld {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if err == syscall.EINTR {
				continue
			}
			if pid <= 0 || err != nil {
				break
			}
			p.reapMu.Lock()
			if ch, ok := p.waiters[pid]; ok {
				delete(p.waiters, pid)
				ch <- ws
			}
			p.reapMu.Unlock()
		}
	}
}

// spawn runs start, which forks one child and returns its pid, with the
// reaper held off until the child's exit has a waiter.
func (p *podShim) spawn(start func() (int, error)) (int, <-chan syscall.WaitStatus, error) {
	p.reapMu.Lock()
	defer p.reapMu.Unlock()
	pid, err := start()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	p.waiters[pid] = ch
	return pid, ch, nil
}

func (p *podShim) serve(conn *os.File) {
	defer conn.Close()
	buf := make([]byte, 64<<10)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	n, oobn, err := recvMsg(conn, buf, oob)
	if err != nil {
		return
	}
	files, err := receivedFiles(oob[:oobn])
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var req Request
	if err == nil {
		err = json.Unmarshal(buf[:n], &req)
	}
	var resp Response
	if err == nil {
		switch req.Op {
		case OpStart:
			resp.State, err = p.start(req.Dir)
		case OpExec:
			resp.ExitCode, err = p.exec(conn, req, files)
		case OpAttach:
			err = p.attach(conn, req, files)
		case OpReopen:
			err = p.reopen(req.Dir)
		default:
			err = fmt.Errorf("unknown op %q", req.Op)
		}
	}
	if err != nil {
		resp.Error = err.Error()
	}
	_ = json.NewEncoder(conn).Encode(&resp)
	if req.Op == OpStart {
		// Back to idle, for as long as the pod runs (an exec is often
		// periodic: a probe, not worth the GC this costs).
		dropColdCode()
	}
}

func receivedFiles(oob []byte) ([]*os.File, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			return files, err
		}
		for _, fd := range fds {
			files = append(files, os.NewFile(uintptr(fd), "received"))
		}
	}
	return files, nil
}

// start starts the container of dir and returns once its command runs. It
// holds the container's shim.lock until the exit is recorded, which is how the
// runtime waits for it. A command that cannot start leaves a StartError in
// exit.json.
func (p *podShim) start(dir string) (*State, error) {
	lock, err := os.OpenFile(filepath.Join(dir, "shim.lock"), os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("container %s is being started already: %w", filepath.Base(dir), err)
	}
	st, err := p.startLocked(dir, lock)
	if err != nil {
		if rerr := recordStartError(dir, err); rerr != nil {
			err = fmt.Errorf("%w (and recording it failed: %v)", err, rerr)
		}
		lock.Close()
		return nil, err
	}
	return st, nil
}

func (p *podShim) startLocked(dir string, lock *os.File) (*State, error) {
	var spec ContainerSpec
	if err := atomicfile.ReadJSON(filepath.Join(dir, "spec.json"), &spec); err != nil {
		return nil, err
	}
	if len(spec.Args) == 0 {
		return nil, errors.New("spec has no command")
	}
	logw, err := openCRILog(spec.LogPath)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", spec.LogPath, err)
	}
	child, own, err := openContainerIO(&spec)
	if err != nil {
		logw.close()
		return nil, err
	}
	copier, err := newOutputCopier(own)
	if err != nil {
		logw.close()
		child.close()
		own.close()
		return nil, err
	}
	var started *Started
	pidns := p.podPIDNamespace()
	pid, exited, err := p.spawn(func() (int, error) {
		var err error
		started, err = StartContainer(p.exe, dir, &spec, pidns, child)
		if err != nil {
			return 0, err
		}
		return started.Cmd.Process.Pid, nil
	})
	child.close()
	if err != nil {
		copier.close()
		logw.close()
		own.close()
		return nil, err
	}
	st := &State{ShimPID: p.hostPID, PID: started.HostPID, StartedAt: time.Now().UnixNano()}
	st.UID, st.GID = uint32(os.Getuid()), uint32(os.Getgid())
	if spec.User != nil {
		st.UID, st.GID, st.Groups = spec.User.UID, spec.User.GID, spec.User.Groups
	}
	run := &running{spec: &spec, hostPID: started.HostPID, log: logw, output: &fanout{}, stdin: own.stdin, terminal: own.terminal}
	err = atomicfile.WriteJSON(filepath.Join(dir, "shim.json"), st)
	if err != nil {
		err = fmt.Errorf("record start: %w", err)
	} else {
		p.mu.Lock()
		if p.stopping {
			err = errStopping
		} else {
			p.running[dir] = run
		}
		p.mu.Unlock()
	}
	if err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
		copier.close()
		logw.close()
		own.close()
		return nil, err
	}

	go p.supervise(dir, lock, pid, exited, run, own, copier)
	return st, nil
}

// containerIO is the shim's ends of a container's stdio.
type containerIO struct {
	// out and errOut are read for the output. With a terminal, out is its
	// master and errOut nil.
	out, errOut *os.File
	stdin       *os.File // written for the input (spec.Stdin): a pipe, or the master
	terminal    *os.File // the master, nil without a terminal (spec.Tty)
}

// openContainerIO makes the container's stdio: pipes, or with spec.Tty a
// terminal, whose slave is the command's stdin, stdout, stderr and
// controlling terminal. Without spec.Stdin, stdin is /dev/null (or, with a
// terminal, nobody writes to it).
func openContainerIO(spec *ContainerSpec) (Stdio, containerIO, error) {
	if spec.Tty {
		// From the shim's /dev: the container's own is not mounted yet, so
		// the command's terminal has no name in it.
		master, slave, err := OpenPty("/")
		if err != nil {
			return Stdio{}, containerIO{}, err
		}
		own := containerIO{out: master, terminal: master}
		if spec.Stdin {
			own.stdin = master
		}
		return Stdio{In: slave, Out: slave, Err: slave, Tty: true}, own, nil
	}
	var child Stdio
	var own containerIO
	fail := func(err error) (Stdio, containerIO, error) {
		child.close()
		own.close()
		return Stdio{}, containerIO{}, err
	}
	var err error
	if own.out, child.Out, err = os.Pipe(); err != nil {
		return fail(err)
	}
	if own.errOut, child.Err, err = os.Pipe(); err != nil {
		return fail(err)
	}
	if spec.Stdin {
		if child.In, own.stdin, err = os.Pipe(); err != nil {
			return fail(err)
		}
	}
	return child, own, nil
}

// close closes each distinct file (a terminal's slave is all three).
func (s Stdio) close() {
	closeFiles(s.In, s.Out, s.Err)
}

func (c containerIO) close() {
	closeFiles(c.out, c.errOut, c.stdin, c.terminal)
}

func closeFiles(files ...*os.File) {
	for i, f := range files {
		if f != nil && !slices.Contains(files[:i], f) {
			f.Close()
		}
	}
}

// supervise copies a container's output to its log and attached clients until
// the command exits, then kills what is left of its process group, records the
// exit once the output is in the log, and lets go of the container's lock.
func (p *podShim) supervise(dir string, lock *os.File, pid int, exited <-chan syscall.WaitStatus, run *running, own containerIO, copier *outputCopier) {
	logw := run.log
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		copier.copy(logw, run.output)
	}()
	ws := <-exited
	finished := time.Now().UnixNano()
	// Like the end of a pid namespace: when the main process is gone, whatever
	// is left in its process group goes too.
	_ = syscall.Kill(-pid, syscall.SIGKILL)

	select {
	case <-drained:
	case <-time.After(drainTimeout):
		copier.stop()
		<-drained
	}
	copier.close()
	run.output.end()
	run.closeStdin()
	own.close()
	logw.close()

	ex := &Exit{ExitCode: exitCode(ws), FinishedAt: finished}
	if err := atomicfile.WriteJSON(filepath.Join(dir, "exit.json"), ex); err != nil {
		fmt.Fprintf(os.Stderr, "jetlet-shim: record exit of %s: %v\n", dir, err)
	}
	// Recorded before it leaves running: a stopping shim that finds none
	// running ends (endIfStopped), and its exits must be on disk by then.
	p.mu.Lock()
	delete(p.running, dir)
	p.mu.Unlock()
	lock.Close()
	p.endIfStopped()
}

// stopOnTerm waits for a SIGTERM, then ends the shim once no container
// runs: systemd sends it to every process of the pod's scope when it stops
// it (the host shutting down), the containers theirs too, and waits for
// all of them to exit (then SIGKILL, after its stop timeout). Ending with
// the containers makes a host whose pods exit on SIGTERM shut down at
// once, as kubelet's pods in their runtime's scopes do.
func (p *podShim) stopOnTerm(term <-chan os.Signal) {
	<-term
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	p.endIfStopped()
}

// endIfStopped ends the shim when it is stopping and no container runs.
func (p *podShim) endIfStopped() {
	p.mu.Lock()
	end := p.stopping && len(p.running) == 0
	p.mu.Unlock()
	if end {
		os.Exit(0)
	}
}

// exitCode is the container-style exit code: the exit status, or 128 plus the
// signal that killed the process.
func exitCode(ws syscall.WaitStatus) int32 {
	if ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(ws.ExitStatus())
}

func recordStartError(dir string, cause error) error {
	return atomicfile.WriteJSON(filepath.Join(dir, "exit.json"), &Exit{
		ExitCode: StartErrorCode, FinishedAt: time.Now().UnixNano(),
		Reason: ReasonStartError, Message: cause.Error(),
	})
}

// exec runs req.Args in the running container of req.Dir with files as its
// stdin, stdout and stderr (stdin its controlling terminal with req.Tty), and
// returns its exit code. The caller closing conn first kills it.
func (p *podShim) exec(conn *os.File, req Request, files []*os.File) (int32, error) {
	if len(files) != 3 {
		return 0, fmt.Errorf("exec wants stdin, stdout and stderr, got %d files", len(files))
	}
	if len(req.Args) == 0 {
		return 0, errors.New("exec command is empty")
	}
	p.mu.Lock()
	r := p.running[req.Dir]
	p.mu.Unlock()
	if r == nil {
		return 0, fmt.Errorf("container %s is not running", filepath.Base(req.Dir))
	}
	pidns := p.podPIDNamespace()
	pid, exited, err := p.spawn(func() (int, error) {
		cmd, err := StartExec(p.exe, req.Dir, r.spec, r.hostPID, pidns, req.Args, Stdio{In: files[0], Out: files[1], Err: files[2], Tty: req.Tty})
		if err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	})
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		f.Close()
	}
	select {
	case ws := <-exited:
		return exitCode(ws), nil
	case <-hungUp(conn):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return exitCode(<-exited), nil
	}
}

func (p *podShim) reopen(dir string) error {
	p.mu.Lock()
	r := p.running[dir]
	p.mu.Unlock()
	if r == nil {
		return fmt.Errorf("container %s is not running", filepath.Base(dir))
	}
	return r.log.reopen()
}
