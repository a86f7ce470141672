package shim

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Started is a container's command once it runs.
type Started struct {
	// Cmd is the container's process (its init, which executed the command):
	// wait on it, or reap its pid with the other children.
	Cmd *exec.Cmd
	// HostPID is the process's pid in the initial pid namespace, by which the
	// runtime signals it and its process group.
	HostPID int
}

// StartContainer starts the container described by spec (already read from
// dir/spec.json) as a child of this process, in a new mount namespace when
// spec.Isolation is set, and returns once the command has been executed (or
// failed to be). exe is the binary to re-execute as the container's init
// (this process's own /proc/self/exe). podPIDs, when not nil, is the pod's
// shared pid namespace, which the container joins (without a pid namespace
// of its own). The command gets its own session, so its process group is
// its host pid. A command that cannot run returns an error naming what
// failed (the container's StartError message), its init killed and reaped.
func StartContainer(exe, dir string, spec *ContainerSpec, podPIDs *os.File, stdio Stdio) (*Started, error) {
	if len(spec.Args) == 0 {
		return nil, errors.New("spec has no command")
	}
	p := initProcess{exe: exe, dir: dir, stdio: stdio, cgroupProcs: spec.CgroupProcs, pidNamespace: podPIDs}
	if spec.Isolation != nil {
		p.cloneflags = unix.CLONE_NEWNS
		if spec.Isolation.OwnPIDs {
			p.cloneflags |= unix.CLONE_NEWPID
			p.pidNamespace = nil
		}
	}
	cmd, hostPID, err := p.start()
	if err != nil {
		return nil, err
	}
	return &Started{Cmd: cmd, HostPID: hostPID}, nil
}

// StartExec runs args in the running container whose command has host pid
// hostPID: in its mount namespace (or its root, see Isolation.Nsenter) and
// its pid namespace (its own, or podPIDs, the pod's), with its environment,
// working dir, user, capabilities and cgroups, in a session of its own.
// This process is already in the pod's other namespaces. It returns once
// args has been executed, or an error naming what failed.
func StartExec(exe, dir string, spec *ContainerSpec, hostPID int, podPIDs *os.File, args []string, stdio Stdio) (*exec.Cmd, error) {
	if len(args) == 0 {
		return nil, errors.New("exec command is empty")
	}
	p := initProcess{
		exe: exe, dir: dir, execArgs: args, execPID: hostPID,
		stdio: stdio, cgroupProcs: spec.CgroupProcs, pidNamespace: podPIDs,
	}
	if iso := spec.Isolation; iso != nil {
		if iso.OwnPIDs {
			own, err := os.Open(fmt.Sprintf("/proc/%d/ns/pid", hostPID))
			if err != nil {
				return nil, fmt.Errorf("container's pid namespace: %w", err)
			}
			defer own.Close()
			p.pidNamespace = own
		}
		p.nsenter = iso.Nsenter
		p.userns = iso.UserNamespace != nil
		p.cgroupns = iso.CgroupNamespace
	}
	cmd, _, err := p.start()
	return cmd, err
}

// Stdio is a process's standard files; a nil one is /dev/null.
type Stdio struct {
	In, Out, Err *os.File
	// Tty makes In, a terminal, the process's controlling terminal (its
	// session is new).
	Tty bool
}

// initProcess is a container's init to start: for the container's command,
// or for execArgs in the container of execPID.
type initProcess struct {
	exe, dir    string
	execArgs    []string
	execPID     int
	stdio       Stdio
	cgroupProcs []string
	cloneflags  uintptr
	// pidNamespace, when set, is the pid namespace the init is started in
	// (the pod's shared one, or an exec joining its container's own).
	pidNamespace *os.File
	// nsenter, when set, starts an exec's init through nsenter in the mount
	// namespace of execPID, with cgroupns in its cgroup namespace, and
	// with userns in its user namespace too.
	nsenter  string
	cgroupns bool
	userns   bool
}

// start starts the init and runs the parent's half of the init protocol (see
// runInit): it reads the init's host pid, waits until the init is set up,
// writes its pid into cgroupProcs and lets it go, then waits for the exec
// (the sync socket closing) or an error.
func (p initProcess) start() (*exec.Cmd, int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("init sync socket: %w", err)
	}
	parent := os.NewFile(uintptr(fds[0]), "init-sync")
	child := os.NewFile(uintptr(fds[1]), "init-sync")
	defer parent.Close()
	exe, err := sealedExe(p.exe)
	if err != nil {
		child.Close()
		return nil, 0, fmt.Errorf("the shim binary: %w", err)
	}
	defer exe.Close()

	cmd := &exec.Cmd{
		Path: fmt.Sprintf("/proc/self/fd/%d", initExeFD), // the child's, once its files are in place
		Args: append([]string{"jetlet-init"}, p.execArgs...),
		Env:  []string{ModeEnv + "=" + ModeInit, DirEnv + "=" + p.dir, OnePEnv},
		// fd 3: initSyncFD; 4: initSpecFD, an exec's only (prepareExec);
		// 5: initExeFD.
		ExtraFiles:  []*os.File{child, nil, exe},
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Setctty: p.stdio.Tty, Cloneflags: p.cloneflags},
	}
	if p.execArgs != nil {
		spec, err := p.prepareExec(cmd)
		if err != nil {
			child.Close()
			return nil, 0, err
		}
		defer spec.Close()
	}
	// Setctty takes Ctty, fd 0 (stdin), as the terminal (kept across
	// nsenter's exec of the init). A nil *os.File in an io.Reader or
	// io.Writer is not nil: /dev/null is.
	if p.stdio.In != nil {
		cmd.Stdin = p.stdio.In
	}
	if p.stdio.Out != nil {
		cmd.Stdout = p.stdio.Out
	}
	if p.stdio.Err != nil {
		cmd.Stderr = p.stdio.Err
	}
	if p.pidNamespace != nil {
		err = startInPIDNamespace(p.pidNamespace, cmd)
	} else {
		err = cmd.Start()
	}
	child.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("start container init: %w", err)
	}
	// Joining cgroups is slow on v1 (each write waits for an RCU grace
	// period): it runs while the init starts up and sets up its mounts.
	joined := make(chan error, 1)
	go func() { joined <- joinCgroups(p.cgroupProcs, cmd.Process.Pid) }()
	hostPID, err := runInitParent(bufio.NewReader(parent), parent, joined)
	if err != nil {
		// A reaper of every child may take the exit first: then Wait fails,
		// which is fine.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, 0, err
	}
	return cmd, hostPID, nil
}

// prepareExec makes cmd an exec's init: it passes the container's spec
// (initSpecFD) and, with nsenter, runs the init through it from the shim
// binary's descriptor (initExeFD). It returns the spec's file, to close
// once cmd has started.
func (p initProcess) prepareExec(cmd *exec.Cmd) (*os.File, error) {
	cmd.Env = append(cmd.Env, initExecPIDEnv+"="+strconv.Itoa(p.execPID))
	spec, err := os.Open(filepath.Join(p.dir, "spec.json"))
	if err != nil {
		return nil, err
	}
	cmd.ExtraFiles[initSpecFD-3] = spec
	if p.nsenter == "" {
		return spec, nil
	}
	cmd.Path = p.nsenter
	cmd.Args = []string{"nsenter", fmt.Sprintf("--mount=/proc/%d/ns/mnt", p.execPID)}
	if p.cgroupns {
		cmd.Args = append(cmd.Args, fmt.Sprintf("--cgroup=/proc/%d/ns/cgroup", p.execPID))
	}
	if p.userns {
		// nsenter enters it last, once the host's root has entered the rest.
		cmd.Args = append(cmd.Args, fmt.Sprintf("--user=/proc/%d/ns/user", p.execPID))
	}
	cmd.Args = append(append(cmd.Args, "--", fmt.Sprintf("/proc/self/fd/%d", initExeFD)), p.execArgs...)
	return spec, nil
}

// sealedExe opens the shim binary at path through a read-only mount of its
// own: a detached copy of the binary's mount (open_tree), made read-only.
// The init is executed from it, so its /proc/self/exe, and a command's that
// a container has run through it ("#!/proc/self/exe" as the container's
// command or an exec's), opens for writing with EROFS and never reaches
// the host's binary (runc's CVE-2019-5736). A copy of a mount is cheap:
// nothing of the binary is copied, unlike runc's sealed memfd. Where the
// copy cannot be had (not root, Linux before 5.12), the binary itself.
func sealedExe(path string) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err == nil {
		err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
		if err != nil {
			unix.Close(fd)
		}
	}
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return os.Open(path)
	}
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}

// joinCgroups writes pid into each cgroup.procs file.
func joinCgroups(procs []string, pid int) error {
	for _, f := range procs {
		if err := os.WriteFile(f, []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("join cgroup: %w", err)
		}
	}
	return nil
}

// runInitParent is the parent's side of the protocol on the sync socket;
// joined reports when the init is in its cgroups.
func runInitParent(r *bufio.Reader, w *os.File, joined <-chan error) (int, error) {
	msg, err := readInitMsg(r, "pid")
	if err != nil {
		return 0, err
	}
	hostPID, err := strconv.Atoi(msg)
	if err != nil {
		return 0, fmt.Errorf("container init sent a bad pid %q", msg)
	}
	if _, err := readInitMsg(r, "ready"); err != nil {
		return 0, err
	}
	if err := <-joined; err != nil {
		return 0, err
	}
	if _, err := w.WriteString("go\n"); err != nil {
		return 0, fmt.Errorf("container init: %w", err)
	}
	// The socket closes at exec (close-on-exec in the init): EOF is success.
	if line, _ := r.ReadString('\n'); line != "" {
		return 0, initMsgError(strings.TrimSuffix(line, "\n"))
	}
	return hostPID, nil
}

// readInitMsg reads the next message from the init and returns what follows
// want, or the error the init reported.
func readInitMsg(r *bufio.Reader, want string) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", errors.New("container init ended before it ran the command")
	}
	line = strings.TrimSuffix(line, "\n")
	verb, rest, _ := strings.Cut(line, " ")
	if verb != want {
		return "", initMsgError(line)
	}
	return rest, nil
}

func initMsgError(line string) error {
	if msg, ok := strings.CutPrefix(line, "error "); ok {
		return errors.New(msg)
	}
	return fmt.Errorf("container init sent %q", line)
}

// startInPIDNamespace starts cmd as a member of the pid namespace target:
// a thread's children are created in the pid namespace it joined, so cmd is
// forked from a locked thread that joins it and then goes back. A thread that
// cannot go back is left locked, and Go ends it with its goroutine.
func startInPIDNamespace(target *os.File, cmd *exec.Cmd) error {
	runtime.LockOSThread()
	own, err := os.Open("/proc/thread-self/ns/pid_for_children")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer own.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWPID); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("join the container's pid namespace: %w", err)
	}
	startErr := cmd.Start()
	if unix.Setns(int(own.Fd()), unix.CLONE_NEWPID) == nil {
		runtime.UnlockOSThread()
	}
	return startErr
}
